// tpu-compare: how far a result is from a reference (.npy files).
// Prints the normwise relative error ||got - ref|| / ||ref||, the largest
// absolute difference and the number of differing elements; exits 1 when the
// error exceeds --tol (integers: any difference when --tol is 0).
#include <fmt/format.h>

#include <iostream>

#include "cli_common.h"
#include "tpu/ir/interp.h"
#include "tpu/isa/npy.h"

namespace {

tpu::ir::Tensor load(const std::string& path) {
  using namespace tpu;
  const isa::NpyArray a = isa::read_npy(path);
  ir::Type t;
  static const std::pair<const char*, ir::DType> kinds[] = {{"|b1", ir::DType::pred}, {"|i1", ir::DType::s8}, {"<i4", ir::DType::s32},
                                                            {"<u2", ir::DType::bf16}, {"<i2", ir::DType::bf16}, {"<f2", ir::DType::f16}, {"<f4", ir::DType::f32},
                                                            {"<u4", ir::DType::u32}};
  bool ok = false;
  for (auto& [d, k] : kinds)
    if (a.descr == d) t.dtype = k, ok = true;
  if (!ok) throw Error(fmt::format("{}: unsupported dtype {}", path, a.descr));
  for (uint64_t d : a.shape) t.dims.push_back(int64_t(d));
  return ir::from_npy(a, t, path);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tpu-compare: normwise relative error of GOT against REF (.npy; bf16 as uint16 bits)", "tpu-compare"};
  std::string ref_path, got_path;
  double tol = -1;
  app.add_option("ref", ref_path, "reference .npy")->required();
  app.add_option("got", got_path, "result .npy")->required();
  app.add_option("--tol", tol, "fail (exit 1) when the relative error exceeds this");
  if (int rc = tpu::cli::parse(app, argc, argv); rc >= 0) return rc;
  // diff's convention: 0 within --tol, 1 beyond it, 2 for trouble.
  return tpu::cli::run([&] {
    const auto ref = load(ref_path), got = load(got_path);
    if (ref.type != got.type)
      throw tpu::Error(fmt::format("{} differ: {} and {}", ref.type.dims != got.type.dims ? "shapes" : "dtypes", ref.type.str(),
                                   got.type.str()));
    const auto d = tpu::ir::compare(got, ref);
    fmt::print("rel_err {:.3g} max_abs {:.3g} differing {}/{}\n", d.relative, d.max_abs, d.differing, ref.v.size());
    return tol >= 0 && (d.relative > tol || (tol == 0 && d.differing)) ? 1 : 0;
  }, 2);
}

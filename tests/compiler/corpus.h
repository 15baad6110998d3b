// The corpus programs (tests/corpus) for the compiler tests: each program
// with its inputs, matched to ENTRY parameters, and XLA's outputs.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tpu/compiler/compile.h"
#include "tpu/ir/interp.h"
#include "tpu/isa/npy.h"

namespace tpu::test {

inline const std::string kCorpus = std::string(TPU_SOURCE_DIR) + "/tests/corpus/";

// Folder names, sorted.
inline std::vector<std::string> corpus_programs() {
  std::vector<std::string> v;
  for (const auto& e : std::filesystem::directory_iterator(kCorpus))
    if (e.is_directory()) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

// Programs for 4 devices end in _4 (the corpus README).
inline bool multi_device(const std::string& name) { return name.size() > 2 && name.substr(name.size() - 2) == "_4"; }

struct CorpusCase {
  ir::Function f;
  std::vector<ir::Tensor> inputs, refs;
};

// `file`: module.hlo, or module.stablehlo.mlir (the same program).
inline CorpusCase load_corpus(const std::string& name, const std::string& file = "module.hlo") {
  const std::string dir = kCorpus + name;
  CorpusCase c;
  c.f = compiler::load_module(dir + "/" + file);
  const auto manifest = nlohmann::json::parse(isa::read_text_file(dir + "/manifest.json"));
  // jax.jit drops unused arguments: match ENTRY parameters to arguments by type, in order.
  static const std::map<std::string, ir::DType> dt = {{"float32", ir::DType::f32},
                                                      {"int8", ir::DType::s8},
                                                      {"int32", ir::DType::s32},
                                                      {"bfloat16", ir::DType::bf16},
                                                      {"bool", ir::DType::pred}};
  size_t a = 0;
  for (size_t p = 0; p < c.f.params().size(); ++p) {
    const ir::Type t = c.f.param_global_type(p);  // an SPMD program takes global values
    while (a < manifest["args"].size()) {
      const auto& arg = manifest["args"][a++];
      const ir::Type at{dt.at(arg["dtype"]), arg["shape"].get<std::vector<int64_t>>()};
      if (at == t) {
        c.inputs.push_back(ir::from_npy(isa::read_npy(dir + "/" + arg["file"].get<std::string>()), t, arg["file"]));
        break;
      }
    }
  }
  REQUIRE(c.inputs.size() == c.f.params().size());
  for (size_t i = 0; i < c.f.results.size(); ++i)
    c.refs.push_back(ir::from_npy(isa::read_npy(fmt::format("{}/out{}.npy", dir, i)), c.f.result_global_type(i), "ref"));
  return c;
}

}  // namespace tpu::test

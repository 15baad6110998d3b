// HLO -> IR. Calls are inlined, tuples disappear into the values they hold,
// reductions name their combiner, and XLA's attribute syntax becomes typed
// fields. Anything outside what the IR can express stops with
// "file:line: unsupported <what>".
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>

#include "rewrite.h"
#include "tpu/hlo/hlo.h"
#include "tpu/isa/suggest.h"
#include "tpu/ir/import.h"
#include "tpu/ir/interp.h"

namespace tpu::ir {
namespace {

using hlo::Instruction;

class Importer {
 public:
  Importer(const hlo::Module& m, std::string_view file) : m_(m), file_(file) {
    // Shardy's mesh: frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["i"=4]>}}
    for (const auto& [k, v] : m.attributes) {
      const size_t at = v.find("#sdy.mesh<[");
      if (k != "frontend_attributes" || at == std::string::npos) continue;
      const size_t end = v.find("]>", at);
      const std::string body = v.substr(at + 11, end == std::string::npos ? std::string::npos : end - at - 11);
      for (size_t q = body.find('"'); q != std::string::npos; q = body.find('"', q)) {
        const size_t q2 = body.find('"', q + 1), eq = body.find('=', q2);
        if (q2 == std::string::npos || eq == std::string::npos) break;
        size_t used = 0;
        int64_t n = 0;
        try {
          n = std::stoll(body.substr(eq + 1), &used);
        } catch (...) {
          throw Error(fmt::format("{}: malformed mesh in xla.sdy.meshes: {}", file_, body));
        }
        if (n < 1 || n > 4096) throw Error(fmt::format("{}: mesh axis of {} devices", file_, n));
        mesh_.push_back({body.substr(q + 1, q2 - q - 1), n});
        q = eq + 1 + used;
      }
      break;
    }
  }

  Function run() {
    const hlo::Computation* entry = m_.entry();
    // XLA's optimised dump of a program over several devices is one
    // device's share, already partitioned: tpuc partitions the whole one.
    for (const auto& [k, v] : m_.attributes)
      if ((k == "num_partitions" || k == "replica_count") && v != "1")
        throw Error(fmt::format("{}:{}: a module XLA has partitioned ({}={}): give tpuc the whole program, as jax.jit(f).lower(...).as_text() "
                                "prints it, not the optimised one",
                                file_, entry->line, k, v));
    std::vector<std::vector<int>> args;
    std::vector<const Instruction*> params;
    for (const auto& inst : entry->instructions)
      if (inst.opcode == "parameter") {
        const int64_t n = param_number(inst);
        if (size_t(n) >= params.size()) params.resize(n + 1, nullptr);
        params[n] = &inst;
      }
    for (size_t i = 0; i < params.size(); ++i) {
      if (!params[i]) throw Error(fmt::format("{}: ENTRY has no parameter({})", file_, i));
      Op op;
      op.kind = OpKind::parameter;
      op.index = int64_t(i);
      op.type = tensor_type(params[i]->shape, *params[i]);
      op.loc = loc(*params[i]);
      const std::string& pn = params[i]->name;
      f_.param_names.push_back(pn[0] == '%' ? pn.substr(1) : pn);  // StableHLO's %arg0
      args.push_back({f_.add(std::move(op))});
    }
    f_.results = computation(*entry, args);
    for (size_t r = 0; r < f_.results.size(); ++r)  // results made global by LocalToGlobalShape
      if (auto it = global_tiles_.find(f_.results[r]); it != global_tiles_.end()) {
        f_.result_tiles.resize(f_.results.size());
        f_.result_tiles[r] = it->second.first;
        if (!it->second.second.empty()) {
          f_.result_tile_of.resize(f_.results.size());
          f_.result_tile_of[r] = it->second.second;
        }
      }
    if (f_.devices == 1) shardings(params);
    f_.checks = m_.checks;
    for (const auto& c : f_.checks)
      if (std::max(c.actual, c.expected) >= f_.results.size())
        throw Error(fmt::format("{}: a check names result {} of {}", file_, std::max(c.actual, c.expected), f_.results.size()));
    f_.name = "main";
    verify(f_);
    return std::move(f_);
  }

 private:
  // "file:line" (HLO) or "file:line:col" (StableHLO), and " (model.py:12)"
  // when the user's source line is known.
  std::string where(const Instruction& i) const {
    return i.col ? fmt::format("{}:{}:{}", file_, i.line, i.col) : fmt::format("{}:{}", file_, i.line);
  }
  static std::string from(const Instruction& i) { return i.source.empty() ? "" : fmt::format(" ({})", i.source); }
  [[noreturn]] void unsupported(const Instruction& i, const std::string& what) const {
    throw Error(fmt::format("{}: unsupported {}{}", where(i), what, from(i)));
  }
  [[noreturn]] void malformed(const Instruction& i, const std::string& what) const {
    throw Error(fmt::format("{}: {}: {}{}", where(i), i.name, what, from(i)));
  }
  std::string loc(const Instruction& i) const { return fmt::format("{}:{} {}{}", file_, i.line, i.name, from(i)); }

  int64_t param_number(const Instruction& i) const {
    try {
      size_t used = 0;
      const long long n = std::stoll(i.literal, &used);
      if (used != i.literal.size() || n < 0 || n > 100000) throw 0;
      return n;
    } catch (...) {
      malformed(i, "parameter number is not a small integer");
    }
  }

  DType dtype(const std::string& s, const Instruction& i) const {
    if (s == "pred") return DType::pred;
    if (s == "s8") return DType::s8;
    if (s == "s32") return DType::s32;
    if (s == "bf16") return DType::bf16;
    if (s == "f16") return DType::f16;
    if (s == "f32") return DType::f32;
    if (s == "u32") return DType::u32;
    unsupported(i, fmt::format("element type {} (tpuc handles pred, s8, s32, u32, f16, bf16, f32)", s));
  }

  Type tensor_type(const hlo::Shape& s, const Instruction& i) const {
    if (s.tuple) unsupported(i, fmt::format("tuple-shaped {}", i.opcode));
    Type t{dtype(s.dtype, i), s.dims};
    return t;
  }

  std::vector<int64_t> ints(const Instruction& i, const char* key, bool required = true) const {
    const std::string* v = i.attribute(key);
    if (!v) {
      if (required) malformed(i, fmt::format("missing attribute {}", key));
      return {};
    }
    return hlo::parse_int_list(*v, i);
  }
  int64_t one_int(const Instruction& i, const char* key, int64_t def) const {
    const std::string* v = i.attribute(key);
    if (!v) return def;
    try {
      size_t used = 0;
      const long long n = std::stoll(*v, &used);
      if (used != v->size()) throw 0;
      return n;
    } catch (...) {
      malformed(i, fmt::format("attribute {} is not an integer", key));
    }
  }

  // Shardy's GlobalToLocalShape (global -> each device's share) and
  // LocalToGlobalShape around a manual computation (shard_map): the
  // function becomes every device's program. A parameter that is split
  // becomes its tile (Function::param_tiles); a value made global again is
  // recorded and becomes a tiled result. Tiles split over every device of
  // the mesh, in the mesh's axis order (row-major device order).
  std::vector<int> spmd_shape(const Instruction& i, const std::vector<const std::vector<int>*>& tuples, bool to_local) {
    if (mesh_.empty()) unsupported(i, "a manual computation without an xla.sdy.meshes mesh");
    int64_t devices = 1;
    for (const auto& [name, n] : mesh_) {
      devices *= n;
      if (devices > 4096) unsupported(i, "a mesh of more than 4096 devices");
    }
    f_.devices = devices;
    std::vector<int> leaves;
    for (auto* tp : tuples) leaves.insert(leaves.end(), tp->begin(), tp->end());
    std::vector<hlo::Shape> shapes = i.shape.tuple ? i.shape.elements : std::vector<hlo::Shape>{i.shape};
    if (shapes.size() != leaves.size()) malformed(i, "changes the number of values");
    const char* key = to_local ? "xla.sdy.in_shardings" : "xla.sdy.out_shardings";
    const std::string text = frontend_text(i);
    for (size_t k = 0; k < shapes.size(); ++k) {
      const Type to = tensor_type(shapes[k], i), from = f_.ops[size_t(leaves[k])].type;
      const Type& global = to_local ? from : to;
      const Type& local = to_local ? to : from;
      if (global == local) continue;
      std::vector<int64_t> tiles;
      int64_t n = 1;
      for (size_t d = 0; d < global.dims.size(); ++d) {
        if (global.dtype != local.dtype || global.dims.size() != local.dims.size() || local.dims[d] == 0 || global.dims[d] % local.dims[d])
          malformed(i, fmt::format("{} is not a tile of {}", local.str(), global.str()));
        tiles.push_back(global.dims[d] / local.dims[d]);
        n *= tiles.back();
      }
      // The mesh axes each dimension is split over (Shardy's attribute), and
      // the tile each device holds; without the attribute, every device its own.
      std::vector<int64_t> tile_of;
      if (size_t open = value_sharding(text, key, k); open != std::string::npos) {
        const std::vector<int64_t> masks = sdy_masks(i, text, open);
        if (mesh().tiles(masks) != tiles)
          malformed(i, fmt::format("{} as tiles [{}] of {} disagrees with its sharding", local.str(), fmt::join(tiles, ","), global.str()));
        tile_of = mesh().tile_of(masks);
      } else if (n != devices) {
        unsupported(i, fmt::format("multi-device program: {} split [{}] over {} of the mesh's {} devices without a Shardy sharding to say which",
                                   global.str(), fmt::join(tiles, ","), n, devices));
      }
      if (to_local) {
        Op& p = f_.ops[size_t(leaves[k])];
        if (p.kind != OpKind::parameter) unsupported(i, "multi-device program: a computed value split over the devices");
        p.type = local;
        if (f_.param_tiles.size() <= size_t(p.index)) f_.param_tiles.resize(size_t(p.index) + 1);
        f_.param_tiles[size_t(p.index)] = tiles;
        if (!tile_of.empty()) {
          if (f_.param_tile_of.size() <= size_t(p.index)) f_.param_tile_of.resize(size_t(p.index) + 1);
          f_.param_tile_of[size_t(p.index)] = tile_of;
        }
      } else {
        global_tiles_[leaves[k]] = {tiles, tile_of};
      }
    }
    return leaves;
  }

  // jax.jit with in_shardings over a mesh (no manual computation): the
  // global program on its mesh, with the mesh axes each parameter's
  // dimensions are split over (Function::mesh, the parameters' Op::sharding;
  // with_sharding_constraint's on the values it names; the
  // spmd-partition pass splits it). Shardy's attribute first, then XLA's
  // sharding={devices=[..]<=[N]} over a mesh of N. Results keep the layout
  // their computation gives them (tpusim writes the global arrays either way).
  void shardings(const std::vector<const Instruction*>& params) {
    std::vector<int64_t> mesh = this->mesh().sizes;
    std::vector<std::vector<int64_t>> ps;
    for (const Instruction* p : params) ps.push_back(sharding_masks(*p, mesh));
    int64_t devices = 1;
    for (int64_t n : mesh) {
      devices *= n;  // each axis at most 4096 devices (the mesh's reader)
      if (devices > 4096) throw Error(fmt::format("{}: unsupported mesh of more than 4096 devices", file_));
    }
    if (devices <= 1) {
      constraints_.clear();
      return;
    }
    f_.mesh = mesh;
    const auto ids = f_.params();
    for (size_t p = 0; p < ps.size(); ++p) f_.ops[size_t(ids[p])].sharding = ps[p];
    for (const auto& [v, masks] : constraints_)
      if (f_.ops[size_t(v)].sharding.empty()) f_.ops[size_t(v)].sharding = masks;
  }

  // Frontend attributes without the escapes of quotes inside them.
  static std::string frontend_text(const Instruction& i) {
    std::string text;
    if (const std::string* fa = i.attribute("frontend_attributes"))
      for (char c : *fa)
        if (c != '\\') text += c;
    return text;
  }

  // Per dimension, the mesh axes (a mask: bit a for axis a) a Shardy
  // sharding splits it over: `[{"x"}, {}, {"y", "z"}]`, read from
  // text[open] (its '[').
  std::vector<int64_t> sdy_masks(const Instruction& i, const std::string& text, size_t open) const {
    if (open == std::string::npos) malformed(i, "a Shardy sharding without dimensions");
    std::vector<int64_t> masks;
    size_t q = open + 1;
    for (;;) {
      while (q < text.size() && (text[q] == ' ' || text[q] == ',')) ++q;
      if (q >= text.size()) malformed(i, "unterminated Shardy sharding");
      if (text[q] == ']') return masks;
      if (text[q] != '{') malformed(i, fmt::format("Shardy sharding: {} where a dimension's axes belong", text[q]));
      const size_t close = text.find('}', q);
      if (close == std::string::npos) malformed(i, "unterminated Shardy sharding");
      int64_t mask = 0, last = -1;
      const std::string axes = text.substr(q + 1, close - q - 1);
      for (size_t a = axes.find('"'); a != std::string::npos; a = axes.find('"', a)) {
        const size_t b = axes.find('"', a + 1);
        if (b == std::string::npos) malformed(i, "Shardy sharding: unterminated axis name");
        const std::string name = axes.substr(a + 1, b - a - 1);
        if (b + 1 < axes.size() && axes[b + 1] == ':') unsupported(i, fmt::format("a sharding over part of mesh axis {}", name));
        const auto m = std::find_if(mesh_.begin(), mesh_.end(), [&](const auto& x) { return x.first == name; });
        if (m == mesh_.end()) malformed(i, fmt::format("a sharding names axis {}, which the mesh lacks", name));
        const int64_t ax = m - mesh_.begin();
        if (ax >= 16) unsupported(i, "a sharding over a mesh of more than 16 axes");
        if (ax <= last) unsupported(i, fmt::format("a dimension split over mesh axes out of the mesh's order ({})", axes));
        last = ax, mask |= int64_t(1) << ax;
        a = b + 1;
      }
      masks.push_back(mask);
      q = close + 1;
    }
  }

  // The mesh axes (a mask per dimension: bit a for axis a) a parameter's
  // sharding splits each dimension over; none: whole on every device.
  // Without a Shardy mesh, XLA's `devices=[...]<=[N]` split of one
  // dimension sets `mesh` to [N].
  std::vector<int64_t> sharding_masks(const Instruction& i, std::vector<int64_t>& mesh) {
    std::vector<int64_t> masks;
    const Type t = i.shape.tuple ? Type{} : tensor_type(i.shape, i);
    const std::string text = frontend_text(i);
    const size_t at = text.find("xla.sdy.sharding");
    if (at != std::string::npos && !mesh_.empty()) {
      masks = sdy_masks(i, text, text.find('[', text.find("<@", at)));
    } else if (const std::string* sh = i.attribute("sharding"); sh && *sh != "{replicated}" && sh->find("maximal") == std::string::npos) {
      const size_t d = sh->find("devices=["), le = sh->find("]<=[");
      if (!mesh_.empty() || d == std::string::npos || le == std::string::npos || sh->find('T', le) != std::string::npos ||
          sh->find("last_tile_dim_replicate") != std::string::npos)
        unsupported(i, fmt::format("sharding {} without Shardy's xla.sdy.sharding (tpuc reads XLA's form for one split dimension)", *sh));
      const std::vector<int64_t> tiles = hlo::parse_int_list("{" + sh->substr(d + 9, le - d - 9) + "}", i);
      const int64_t n = hlo::parse_int_list("{" + sh->substr(le + 4, sh->find(']', le + 4) - le - 4) + "}", i).at(0);
      if (mesh.empty()) mesh = {n};
      if (mesh != std::vector<int64_t>{n}) unsupported(i, fmt::format("sharding {} over another device count than {}", *sh, mesh[0]));
      int64_t split = 0;
      for (int64_t x : tiles) {
        masks.push_back(x > 1 ? 1 : 0);
        split += x > 1;
        if (x > 1 && x != n) unsupported(i, fmt::format("sharding {} (tpuc reads XLA's form for one dimension over every device)", *sh));
      }
      if (split > 1) unsupported(i, fmt::format("sharding {} (tpuc reads XLA's form for one split dimension)", *sh));
    }
    if (std::all_of(masks.begin(), masks.end(), [](int64_t m) { return m == 0; })) return {};
    if (masks.size() != t.dims.size()) malformed(i, fmt::format("a sharding of {} dimensions for {}", masks.size(), t.str()));
    for (size_t k = 0; k < masks.size(); ++k) {
      const int64_t n = Mesh{mesh}.count(masks[k]);
      if (t.dims[k] % n) unsupported(i, fmt::format("sharding of {}: dimension {} does not divide into {}", t.str(), k, n));
    }
    return masks;
  }

  // Where value k's dimensions start ('[') in a sharding_per_value
  // attribute `key`: "<@mesh, [{\"i\"}, {}]>" per value; npos without one.
  static size_t value_sharding(const std::string& text, const char* key, size_t k) {
    size_t p = text.find(key);
    if (p == std::string::npos) return p;
    for (size_t v = 0; v <= k; ++v) {
      p = text.find("<@", p + 1);
      if (p == std::string::npos) return p;
    }
    return text.find('[', p);
  }

  // replica_groups of a collective as lists of devices: {{0,1},{2,3}},
  // {} (every device), Shardy's mesh['x'=2,'y'=4] {'y'} (the devices that
  // differ only along the named axes) or the iota form [G,S]<=[N].
  std::vector<std::vector<int64_t>> replica_groups(const Instruction& i) const {
    const std::string* g = i.attribute("replica_groups");
    const int64_t n = f_.devices;
    std::vector<std::vector<int64_t>> groups;
    auto all = [&] {
      groups.assign(1, {});
      for (int64_t d = 0; d < n; ++d) groups[0].push_back(d);
      return groups;
    };
    if (!g || *g == "{}") return all();
    const std::string s = *g;
    if (s.rfind("mesh[", 0) == 0) {
      const size_t brace = s.find('{');
      if (brace == std::string::npos) malformed(i, "replica_groups: mesh[...] without {axes}");
      int64_t over = 0;
      for (size_t a = 0; a < mesh_.size(); ++a)
        if (s.find("'" + mesh_[a].first + "'", brace) != std::string::npos) over |= int64_t(1) << a;
      return mesh().groups(over);
    }
    if (s.size() >= 2 && s[0] == '[') {  // [G,S]<=[N]
      const size_t le = s.find("<=");
      if (le == std::string::npos || s.find('T', le) != std::string::npos)
        unsupported(i, fmt::format("replica_groups {}", s));
      const std::vector<int64_t> gs = hlo::parse_int_list("{" + s.substr(1, s.find(']') - 1) + "}", i);
      if (gs.size() != 2 || gs[0] * gs[1] != n) unsupported(i, fmt::format("replica_groups {} on {} devices", s, n));
      for (int64_t a = 0; a < gs[0]; ++a) {
        groups.push_back({});
        for (int64_t b = 0; b < gs[1]; ++b) groups.back().push_back(a * gs[1] + b);
      }
      return groups;
    }
    // {{0,1},{2,3}}
    if (s.size() < 4 || s.front() != '{' || s.back() != '}') malformed(i, fmt::format("replica_groups {}", s));
    const std::string inner = s.substr(1, s.size() - 2);
    for (size_t p = inner.find('{'); p != std::string::npos; p = inner.find('{', p + 1)) {
      const size_t q = inner.find('}', p);
      if (q == std::string::npos) malformed(i, fmt::format("replica_groups {}", s));
      groups.push_back(hlo::parse_int_list(inner.substr(p, q - p + 1), i));
    }
    return groups;
  }

  // The combiner an HLO opcode names: add, multiply, maximum, minimum, and, or.
  static std::optional<Combiner> combiner_named(const std::string& opcode) {
    static const std::pair<const char*, Combiner> ops[] = {{"add", Combiner::add},         {"multiply", Combiner::multiply},
                                                           {"maximum", Combiner::maximum}, {"minimum", Combiner::minimum},
                                                           {"and", Combiner::and_},        {"or", Combiner::or_}};
    for (auto& [n, k] : ops)
      if (opcode == n) return k;
    return std::nullopt;
  }
  // The direction a compare's direction attribute names (EQ .. GE).
  static std::optional<Direction> direction_named(const std::string* d) {
    for (int k = 0; d && k < 6; ++k)
      if (*d == direction_name(Direction(k))) return Direction(k);
    return std::nullopt;
  }

  // The combiner of a reduction's to_apply computation: a single binary op of
  // its two parameters.
  Combiner combiner(const Instruction& i, const char* attr = "to_apply") const {
    const std::string* name = i.attribute(attr);
    if (!name) malformed(i, fmt::format("missing {}", attr));
    const hlo::Computation* c = m_.find(*name);
    if (!c) malformed(i, fmt::format("{} names unknown computation {}", attr, *name));
    const Instruction* r = c->root();
    if (r && r->operands.size() == 2 && c->instructions.size() == 3) {
      const Instruction* a = c->find(r->operands[0]);
      const Instruction* b = c->find(r->operands[1]);
      if (a && b && a->opcode == "parameter" && b->opcode == "parameter" && a != b) {
        // The region works on scalars of the reduction's element type.
        for (const Instruction* x : {a, b, r})
          if (!i.shape.tuple && (x->shape.tuple || x->shape.dtype != i.shape.dtype || !x->shape.dims.empty()))
            malformed(i, fmt::format("{} {} takes and returns {}[], not {}", attr, *name, i.shape.dtype, x->shape.to_string()));
        if (const auto k = combiner_named(r->opcode)) return *k;
      }
    }
    unsupported(i, fmt::format("{} whose {} ({}) is not one add/multiply/maximum/minimum/and/or", i.opcode, attr, *name));
  }

  // The select computation of select-and-scatter: one compare of its two
  // parameters; returns the direction with the selected value on the left.
  Direction select_direction(const Instruction& i) const {
    const std::string* name = i.attribute("select");
    if (!name) malformed(i, "missing select");
    const hlo::Computation* c = m_.find(*name);
    if (!c) malformed(i, fmt::format("select names unknown computation {}", *name));
    const Instruction* r = c->root();
    if (r && r->opcode == "compare" && r->operands.size() == 2 && c->instructions.size() == 3) {
      const Instruction* a = c->find(r->operands[0]);
      const Instruction* b = c->find(r->operands[1]);
      const auto d = direction_named(r->attribute("direction"));
      if (a && b && d && a->opcode == "parameter" && b->opcode == "parameter" && a != b) {
        const bool swapped = a->literal == "1";  // compare(param 1, param 0): the candidate on the left
        static const Direction flip[] = {Direction::EQ, Direction::NE, Direction::GT, Direction::GE, Direction::LT, Direction::LE};
        return swapped ? flip[int(*d)] : *d;
      }
    }
    unsupported(i, fmt::format("select-and-scatter whose select ({}) is not one compare of its parameters", *name));
  }

  static bool integer_fits(DType d, double x) {
    if (x != std::floor(x)) return false;
    switch (d) {
      case DType::pred: return x == 0 || x == 1;
      case DType::s8: return x >= -128 && x <= 127;
      case DType::s32: return x >= -2147483648.0 && x <= 2147483647.0;
      case DType::u32: return x >= 0 && x <= 4294967295.0;
      default: return true;
    }
  }

  std::vector<double> literal(const Instruction& i, const Type& t) const {
    std::vector<double> v;
    const std::string& s = i.literal;
    size_t p = 0;
    while (p < s.size()) {
      const char c = s[p];
      if (c == '{' || c == '}' || c == ',' || c == ' ' || c == '\n' || c == '\t') {
        ++p;
        continue;
      }
      size_t e = p;
      while (e < s.size() && s[e] != ',' && s[e] != '}' && s[e] != '{' && s[e] != ' ') ++e;
      const std::string tok = s.substr(p, e - p);
      p = e;
      if (tok == "true") {
        v.push_back(1);
      } else if (tok == "false") {
        v.push_back(0);
      } else if (tok == "inf" || tok == "+inf") {
        v.push_back(INFINITY);
      } else if (tok == "-inf") {
        v.push_back(-INFINITY);
      } else if (tok == "nan" || tok.rfind("nan(", 0) == 0) {
        v.push_back(std::numeric_limits<double>::quiet_NaN());
      } else if (tok == "-nan" || tok.rfind("-nan(", 0) == 0) {
        v.push_back(-std::numeric_limits<double>::quiet_NaN());
      } else {
        char* end = nullptr;
        const double x = std::strtod(tok.c_str(), &end);
        if (tok.empty() || *end) malformed(i, fmt::format("bad constant value '{}'", tok));
        v.push_back(x);
      }
    }
    if (int64_t(v.size()) != t.elements() && !(v.size() == 1 && t.elements() == 1))
      malformed(i, fmt::format("constant has {} values for {}", v.size(), t.str()));
    for (double& x : v) {
      if (!is_float(t.dtype) && !integer_fits(t.dtype, x))
        malformed(i, fmt::format("constant value {} does not fit {}", x, dtype_name(t.dtype)));
      x = canonicalize_value(t.dtype, x);
    }
    return v;
  }

  // XLA's per-dimension lists: dimensions separated by 'x', the values of
  // one dimension by '_' ("1_1x0_2" -> {{1,1},{0,2}}); each dimension must
  // have between `lo` and `hi` values.
  std::vector<std::vector<int64_t>> int_grid(const Instruction& i, const std::string& s, size_t lo, size_t hi,
                                             const char* what) const {
    std::vector<std::vector<int64_t>> grid;
    auto split = [](const std::string& t, char sep) {
      std::vector<std::string> parts;
      size_t p = 0;
      for (size_t e; (e = t.find(sep, p)) != std::string::npos; p = e + 1) parts.push_back(t.substr(p, e - p));
      parts.push_back(t.substr(p));
      return parts;
    };
    for (const std::string& dim : split(s, 'x')) {
      std::vector<int64_t> v;
      for (const std::string& tok : split(dim, '_')) {
        try {
          size_t used = 0;
          v.push_back(std::stoll(tok, &used));
          if (used != tok.size()) throw 0;
        } catch (...) {
          malformed(i, fmt::format("bad {} '{}'", what, s));
        }
      }
      if (v.size() < lo || v.size() > hi) malformed(i, fmt::format("bad {} '{}'", what, s));
      grid.push_back(std::move(v));
    }
    return grid;
  }
  // "3x3" -> {3,3}.
  std::vector<int64_t> xlist(const Instruction& i, const std::string& s) const {
    std::vector<int64_t> v;
    for (const auto& d : int_grid(i, s, 1, 1, "window value")) v.push_back(d[0]);
    return v;
  }

  struct Window {
    std::vector<int64_t> size, stride, lo, hi, lhs_dil, rhs_dil;
  };
  Window window(const Instruction& i, size_t rank) const {
    Window w;
    const std::string* s = i.attribute("window");
    if (!s) malformed(i, "missing window");
    std::string body = *s;
    if (!body.empty() && body.front() == '{') body = body.substr(1, body.size() - 2);
    size_t p = 0;
    while (p < body.size()) {
      while (p < body.size() && body[p] == ' ') ++p;
      size_t e = body.find(' ', p);
      if (e == std::string::npos) e = body.size();
      const std::string item = body.substr(p, e - p);
      p = e;
      const size_t eq = item.find('=');
      if (eq == std::string::npos) continue;
      const std::string k = item.substr(0, eq), val = item.substr(eq + 1);
      if (k == "size") {
        w.size = xlist(i, val);
      } else if (k == "stride") {
        w.stride = xlist(i, val);
      } else if (k == "pad") {
        for (const auto& d : int_grid(i, val, 2, 2, "padding")) w.lo.push_back(d[0]), w.hi.push_back(d[1]);
      } else if (k == "lhs_dilate" || k == "base_dilate") {
        w.lhs_dil = xlist(i, val);
      } else if (k == "rhs_dilate" || k == "window_dilate") {
        w.rhs_dil = xlist(i, val);
      } else if (k == "lhs_reversal" || k == "rhs_reversal" || k == "window_reversal") {
        for (int64_t r : xlist(i, val))
          if (r) unsupported(i, "window reversal");
      } else {
        unsupported(i, fmt::format("window attribute {}", k));
      }
    }
    if (w.size.size() != rank) malformed(i, fmt::format("window has {} sizes, expected {}", w.size.size(), rank));
    auto fill = [&](std::vector<int64_t>& v, int64_t d) {
      if (v.empty()) v.assign(rank, d);
      if (v.size() != rank) malformed(i, "window attributes differ in rank");
    };
    fill(w.stride, 1), fill(w.lo, 0), fill(w.hi, 0), fill(w.lhs_dil, 1), fill(w.rhs_dil, 1);
    return w;
  }

  ConvDims dim_labels(const Instruction& i, size_t rank) const {
    const std::string* s = i.attribute("dim_labels");
    if (!s) malformed(i, "missing dim_labels");
    const size_t u = s->find('_'), a = s->find("->");
    if (u == std::string::npos || a == std::string::npos || u > a) malformed(i, "bad dim_labels");
    const std::string in = s->substr(0, u), k = s->substr(u + 1, a - u - 1), out = s->substr(a + 2);
    if (in.size() != rank || k.size() != rank || out.size() != rank) malformed(i, "dim_labels do not match the rank");
    ConvDims c;
    auto spatial = [&](const std::string& lab, std::vector<int64_t>& sp) {
      sp.assign(rank - 2, -1);
      for (size_t d = 0; d < lab.size(); ++d)
        if (std::isdigit(uint8_t(lab[d]))) {
          const size_t n = size_t(lab[d] - '0');
          if (n >= rank - 2) malformed(i, "bad spatial label in dim_labels");
          sp[n] = int64_t(d);
        }
    };
    auto find = [&](const std::string& lab, char ch) -> int64_t {
      const size_t d = lab.find(ch);
      if (d == std::string::npos) malformed(i, fmt::format("dim_labels lack '{}'", ch));
      return int64_t(d);
    };
    c.in_batch = find(in, 'b'), c.in_feature = find(in, 'f');
    c.k_in = find(k, 'i'), c.k_out = find(k, 'o');
    c.out_batch = find(out, 'b'), c.out_feature = find(out, 'f');
    spatial(in, c.in_spatial), spatial(k, c.k_spatial), spatial(out, c.out_spatial);
    return c;
  }

  Precision precision(const Instruction& i) const {
    const std::string* s = i.attribute("operand_precision");
    if (!s) return Precision::default_;
    Precision p = Precision::default_;
    std::string t = *s;
    for (char& c : t) c = char(std::tolower(uint8_t(c)));
    if (t.find("high") != std::string::npos) p = Precision::high;
    if (t.find("highest") != std::string::npos) p = Precision::highest;
    return p;
  }

  // Whether a shape's layout, if printed, is row-major ({n-1,...,1,0}):
  // elsewhere layouts do not change values, and tpuc ignores them.
  static bool row_major(const hlo::Shape& s) {
    for (size_t k = 0; k < s.layout.size(); ++k)
      if (s.layout[k] != int64_t(s.layout.size() - 1 - k)) return false;
    return true;
  }
  // Imports one computation with the given parameter values; returns the
  // leaves of its root.
  std::vector<int> computation(const hlo::Computation& c, const std::vector<std::vector<int>>& args) {
    if (++depth_ > 64) throw Error(fmt::format("{}:{}: calls nest deeper than 64", file_, c.line));
    std::map<std::string, std::vector<int>> env;
    current_.push_back(&c);
    for (const auto& inst : c.instructions) {
      std::vector<int> values = instruction(inst, env, args);
      check_declared_shape(inst, values);
      env[inst.name] = std::move(values);
    }
    current_.pop_back();
    --depth_;
    const Instruction* root = c.root();
    if (!root) throw Error(fmt::format("{}:{}: computation {} has no ROOT", file_, c.line, c.name));
    return env[root->name];
  }

  std::vector<int> instruction(const Instruction& i, std::map<std::string, std::vector<int>>& env,
                               const std::vector<std::vector<int>>& args) {
    std::vector<int> in;
    std::vector<const std::vector<int>*> tuples;
    for (const auto& name : i.operands) {
      auto it = env.find(name);
      if (it == env.end()) malformed(i, fmt::format("operand {} is not defined before", name));
      tuples.push_back(&it->second);
      in.push_back(it->second.empty() ? -1 : it->second[0]);
    }
    const std::string& opc = i.opcode;
    auto single = [&](size_t k) {
      if (tuples[k]->size() != 1) unsupported(i, fmt::format("tuple operand of {}", opc));
      return (*tuples[k])[0];
    };
    if (opc == "parameter") {
      const int64_t n = param_number(i);
      if (size_t(n) >= args.size()) malformed(i, "parameter number out of range");
      return args[n];
    }
    if (opc == "tuple") {
      std::vector<int> leaves;
      for (auto* t : tuples) leaves.insert(leaves.end(), t->begin(), t->end());
      return leaves;
    }
    if (opc == "get-tuple-element") {
      const int64_t k = one_int(i, "index", -1);
      if (tuples.size() != 1) malformed(i, "get-tuple-element takes one operand");
      // Leaves are flattened; find the element's leaf range from the operand's shape.
      const auto& t = *tuples[0];
      std::vector<size_t> sizes = tuple_leaf_counts(i);
      if (k < 0 || size_t(k) >= sizes.size()) malformed(i, "tuple index out of range");
      size_t start = 0;
      for (int64_t e = 0; e < k; ++e) start += sizes[e];
      if (start + sizes[k] > t.size()) malformed(i, "operand holds fewer values than its tuple shape");
      return std::vector<int>(t.begin() + start, t.begin() + start + sizes[k]);
    }
    if (opc == "call" || opc == "fusion") {  // a fusion of XLA's optimised HLO: its computation inlined
      const char* attr = opc == "call" ? "to_apply" : "calls";
      const std::string* name = i.attribute(attr);
      const hlo::Computation* callee = name ? m_.find(*name) : nullptr;
      if (!callee) malformed(i, fmt::format("{} without a known {}", opc, attr));
      std::vector<std::vector<int>> a;
      for (auto* t : tuples) a.push_back(*t);
      return computation(*callee, a);
    }
    if (opc == "conditional") return conditional(i, tuples);
    if (opc == "while") {
      // A loop of the IR: its condition and body become functions of the
      // state's values (tuples flattened), imported once each.
      const std::string* cn = i.attribute("condition");
      const std::string* bn = i.attribute("body");
      const hlo::Computation* cond = cn ? m_.find(*cn) : nullptr;
      const hlo::Computation* body = bn ? m_.find(*bn) : nullptr;
      if (!cond || !body || tuples.size() != 1) malformed(i, "while needs one operand, a condition and a body");
      const std::vector<int>& state = *tuples[0];
      if (state.empty()) unsupported(i, "while loop without state");
      Op w;
      w.kind = OpKind::while_, w.operands = state, w.type = {DType::pred, {}}, w.loc = loc(i);
      for (const hlo::Computation* c : {cond, body}) {
        Function g = region(*c, state);
        if (c == cond && (g.results.size() != 1 || g.ops[size_t(g.results[0])].type != Type{DType::pred, {}}))
          malformed(i, "while condition must return one pred[]");
        if (c == body) {
          if (g.results.size() != state.size()) malformed(i, "while body changes the number of values");
          for (size_t k = 0; k < state.size(); ++k)
            if (g.ops[size_t(g.results[k])].type != f_.ops[size_t(state[k])].type) malformed(i, "while body changes the state's types");
        }
        w.regions.push_back(std::move(g));
      }
      const int loop = f_.add(std::move(w));
      std::vector<int> out;
      for (size_t k = 0; k < state.size(); ++k) {
        Op e;
        e.kind = OpKind::get_tuple_element, e.operands = {loop}, e.index = int64_t(k), e.type = f_.ops[size_t(state[k])].type, e.loc = loc(i);
        out.push_back(f_.add(std::move(e)));
      }
      return out;
    }
    if (opc == "dynamic-slice" || opc == "dynamic-update-slice") return {dynamic_slice(i, tuples, opc == "dynamic-update-slice")};
    if (opc == "custom-call") {
      const std::string* target = i.attribute("custom_call_target");
      const std::string t = target ? *target : "";
      if (t == "\"xla.sdy.GlobalToLocalShape\"" || t == "xla.sdy.GlobalToLocalShape" || t == "\"xla.sdy.LocalToGlobalShape\"" ||
          t == "xla.sdy.LocalToGlobalShape")
        return spmd_shape(i, tuples, t.find("GlobalToLocal") != std::string::npos);
      if (t.rfind("\"xla.sdy.", 0) == 0 || t.rfind("xla.sdy.", 0) == 0 || t == "\"Sharding\"" || t == "Sharding" ||
          t == "\"SPMDFullToShardShape\"" || t == "\"SPMDShardToFullShape\"") {
        // Sharding annotations: identity on one device.
        std::vector<int> leaves;
        for (auto* tp : tuples) leaves.insert(leaves.end(), tp->begin(), tp->end());
        // with_sharding_constraint in a global program: the value's layout (shardings()).
        if ((t == "\"Sharding\"" || t == "Sharding") && f_.devices == 1 && leaves.size() == 1 && !mesh_.empty()) {
          const std::string text = frontend_text(i);
          if (size_t open = value_sharding(text, "xla.sdy.sharding", 0); open != std::string::npos)
            constraints_.emplace(leaves[0], sdy_masks(i, text, open));
        }
        std::vector<hlo::Shape> shapes = i.shape.tuple ? i.shape.elements : std::vector<hlo::Shape>{i.shape};
        if (shapes.size() != leaves.size()) unsupported(i, fmt::format("custom-call {} changing the number of values", t));
        for (size_t k = 0; k < shapes.size(); ++k)
          if (auto g = global_tiles_.find(leaves[k]);
              tensor_type(shapes[k], i) != (g == global_tiles_.end() ? f_.ops[leaves[k]].type : tiled_type(f_.ops[leaves[k]].type, g->second.first)))
            unsupported(i, fmt::format("multi-device program: custom-call {} changes {} to {} (the multi-chip work adds SPMD)",
                                       t, f_.ops[leaves[k]].type.str(), shapes[k].to_string()));
        return leaves;
      }
      unsupported(i, fmt::format("custom-call {}", t.empty() ? "without a target" : t));
    }
    if (opc == "all-reduce" && f_.devices > 1) {
      if (i.operands.size() != 1) unsupported(i, "all-reduce of several operands");
      Op op;
      op.kind = OpKind::all_reduce;
      op.operands = {single(0)};
      op.type = f_.ops[size_t(op.operands[0])].type;
      op.combiner = combiner(i);
      op.groups = replica_groups(i);
      op.loc = loc(i);
      return {f_.add(std::move(op))};
    }
    if (f_.devices > 1 && (opc == "all-gather" || opc == "reduce-scatter" || opc == "all-to-all" || opc == "collective-permute")) {
      if (i.operands.size() != 1) unsupported(i, fmt::format("{} of several operands", opc));
      Op op;
      op.operands = {single(0)};
      op.type = tensor_type(i.shape, i);
      op.loc = loc(i);
      if (opc != "collective-permute") {
        op.kind = opc == "all-gather" ? OpKind::all_gather : opc == "reduce-scatter" ? OpKind::reduce_scatter : OpKind::all_to_all;
        const std::string* d = i.attribute("dimensions");
        const std::vector<int64_t> dims = d ? hlo::parse_int_list(*d, i) : std::vector<int64_t>{};
        if (dims.size() != 1) malformed(i, fmt::format("{} needs one dimension", opc));
        op.index = dims[0];
        op.groups = replica_groups(i);
        if (op.kind == OpKind::reduce_scatter) op.combiner = combiner(i);
      } else {
        op.kind = OpKind::collective_permute;
        const std::string* pairs = i.attribute("source_target_pairs");
        if (pairs && pairs->size() > 2) {
          const std::string inner = pairs->substr(1, pairs->size() - 2);
          for (size_t p = inner.find('{'); p != std::string::npos; p = inner.find('{', p + 1)) {
            const size_t q = inner.find('}', p);
            if (q == std::string::npos) malformed(i, fmt::format("source_target_pairs {}", *pairs));
            op.groups.push_back(hlo::parse_int_list(inner.substr(p, q - p + 1), i));
          }
        }
      }
      return {f_.add(std::move(op))};
    }
    if (opc == "all-reduce" || opc == "all-gather" || opc == "reduce-scatter" || opc == "collective-permute" ||
        opc == "all-to-all") {
      // On one device every replica group has one member: the identity.
      const std::string* g = i.attribute("replica_groups");
      const bool one_device = !g || *g == "{}" || *g == "{{0}}";
      if (!one_device) unsupported(i, fmt::format("{} across devices ({}) (the multi-chip work adds collectives)", opc, *g));
      if (i.operands.size() != 1) unsupported(i, fmt::format("{} of several operands", opc));
      return {single(0)};
    }
    if (opc == "copy" || opc == "opt-barrier" || opc == "optimization-barrier") {
      std::vector<int> leaves;
      for (auto* t : tuples) leaves.insert(leaves.end(), t->begin(), t->end());
      return leaves;
    }
    if (opc == "reduce" && i.shape.tuple) return arg_reduce(i, tuples);
    if (opc == "sort") return sort(i, tuples);
    if (opc == "topk") return topk(i, tuples);
    if (opc == "reduce-window" && i.shape.tuple) return windowed_select(i, tuples);
    if (i.shape.tuple) unsupported(i, fmt::format("tuple-shaped {}", opc));
    if (opc == "triangular-solve") {
      if (i.operands.size() != 2) malformed(i, "triangular-solve takes two operands");
      return {triangular_solve(i, single(0), single(1))};
    }
    if (opc == "reduce-precision") {
      if (i.operands.size() != 1) malformed(i, "reduce-precision takes one operand");
      return {reduce_precision(i, single(0))};
    }
    if (opc == "popcnt") {
      if (i.operands.size() != 1) malformed(i, "popcnt takes one operand");
      return {popcnt(i, single(0))};
    }

    Op op;
    op.type = tensor_type(i.shape, i);
    op.loc = loc(i);
    for (size_t k = 0; k < tuples.size(); ++k) op.operands.push_back(single(k));
    static const std::map<std::string, OpKind> simple = {
        {"add", OpKind::add}, {"subtract", OpKind::subtract}, {"multiply", OpKind::multiply}, {"divide", OpKind::divide},
        {"maximum", OpKind::maximum}, {"minimum", OpKind::minimum}, {"power", OpKind::power}, {"and", OpKind::and_},
        {"or", OpKind::or_}, {"xor", OpKind::xor_}, {"not", OpKind::not_}, {"negate", OpKind::negate},
        {"abs", OpKind::abs}, {"exponential", OpKind::exponential}, {"log", OpKind::log}, {"tanh", OpKind::tanh},
        {"logistic", OpKind::logistic}, {"rsqrt", OpKind::rsqrt}, {"sqrt", OpKind::sqrt}, {"floor", OpKind::floor},
        {"ceil", OpKind::ceil}, {"round-nearest-even", OpKind::round_nearest_even}, {"sign", OpKind::sign},
        {"erf", OpKind::erf}, {"sine", OpKind::sine}, {"cosine", OpKind::cosine},
        {"exponential-minus-one", OpKind::exponential_minus_one}, {"log-plus-one", OpKind::log_plus_one},
        {"is-finite", OpKind::is_finite}, {"round-nearest-afz", OpKind::round_nearest_afz}, {"remainder", OpKind::remainder}, {"atan2", OpKind::atan2},
        {"shift-left", OpKind::shift_left}, {"shift-right-arithmetic", OpKind::shift_right_arithmetic},
        {"shift-right-logical", OpKind::shift_right_logical}, {"select", OpKind::select}, {"clamp", OpKind::clamp},
        {"convert", OpKind::convert}, {"reshape", OpKind::reshape}, {"bitcast", OpKind::reshape},
        {"bitcast-convert", OpKind::bitcast_convert}};
    if (opc == "bitcast-convert") {
      if (op.operands.size() != 1) malformed(i, "bitcast-convert takes one operand");
      const Type& xt = f_.ops[size_t(op.operands[0])].type;
      if (!is_32bit(xt.dtype) || !is_32bit(op.type.dtype) || xt.dims != op.type.dims)
        unsupported(i, fmt::format("bitcast-convert from {} to {} (tpuc reinterprets between s32, u32 and f32 of one shape)", xt.str(),
                                   op.type.str()));
    }
    if (auto it = simple.find(opc); it != simple.end()) {
      op.kind = it->second;
      if (opc == "bitcast" && f_.ops[op.operands[0]].type.dtype != op.type.dtype) unsupported(i, "bitcast changing the element type");
      if (opc == "bitcast") {  // a reshape where both sides lie in row-major order (XLA's optimised HLO)
        const Instruction* from = current_.back()->find(i.operands[0]);
        if (!row_major(i.shape) || (from && !row_major(from->shape)))
          unsupported(i, "bitcast between layouts other than row-major (a transpose in memory)");
      }
      // StableHLO's select may take one predicate for the whole tensor.
      if (opc == "select" && op.operands.size() == 3 && f_.ops[size_t(op.operands[0])].type.dims.empty() && !op.type.dims.empty()) {
        Op b;
        b.kind = OpKind::broadcast, b.operands = {op.operands[0]}, b.type = {DType::pred, op.type.dims}, b.loc = op.loc;
        op.operands[0] = f_.add(std::move(b));
      }
    } else if (opc == "constant") {
      op.kind = OpKind::constant;
      op.literal = literal(i, op.type);
      op.opaque = i.attribute("tpuc.opaque") != nullptr;
    } else if (opc == "iota") {
      op.kind = OpKind::iota;
      op.index = one_int(i, "iota_dimension", 0);
    } else if (opc == "broadcast") {
      op.kind = OpKind::broadcast;
      op.dims = ints(i, "dimensions");
    } else if (opc == "transpose") {
      op.kind = OpKind::transpose;
      op.dims = ints(i, "dimensions");
    } else if (opc == "reverse") {
      op.kind = OpKind::reverse;
      op.dims = ints(i, "dimensions");
    } else if (opc == "concatenate") {
      op.kind = OpKind::concatenate;
      const auto d = ints(i, "dimensions");
      if (d.size() != 1) malformed(i, "concatenate needs one dimension");
      op.index = d[0];
    } else if (opc == "slice") {
      op.kind = OpKind::slice;
      slice_attr(i, op);
    } else if (opc == "pad") {
      op.kind = OpKind::pad;
      pad_attr(i, op);
    } else if (opc == "compare") {
      op.kind = OpKind::compare;
      const auto d = direction_named(i.attribute("direction"));
      if (!d) malformed(i, "compare needs direction=EQ|NE|LT|LE|GT|GE");
      op.direction = *d;
      // UNSIGNED orders pred (false < true) and u32 as their own types do.
      const std::string* t = i.attribute("type");
      const DType xd = op.operands.empty() ? DType::f32 : f_.ops[size_t(op.operands[0])].type.dtype;
      if (t && *t == "UNSIGNED" && xd != DType::pred && xd != DType::u32)
        unsupported(i, fmt::format("compare type UNSIGNED of {}", dtype_name(xd)));
      if (t && *t != "FLOAT" && *t != "SIGNED" && *t != "TOTALORDER" && *t != "UNSIGNED")
        unsupported(i, fmt::format("compare type {}", *t));
      if (t && *t == "TOTALORDER" && is_float(xd))
        for (int& x : op.operands) x = total_order_key(x, op.loc);
    } else if (opc == "dot") {
      op.kind = OpKind::dot;
      op.lhs_batch = ints(i, "lhs_batch_dims", false), op.rhs_batch = ints(i, "rhs_batch_dims", false);
      op.lhs_contract = ints(i, "lhs_contracting_dims", false), op.rhs_contract = ints(i, "rhs_contracting_dims", false);
      op.precision = precision(i);
    } else if (opc == "convolution") {
      op.kind = OpKind::convolution;
      const size_t rank = op.type.dims.size();
      if (rank < 3) unsupported(i, "convolution without spatial dimensions");
      const Window w = window(i, rank - 2);
      op.window = w.size, op.strides = w.stride, op.lo = w.lo, op.hi = w.hi;
      op.lhs_dilation = w.lhs_dil, op.rhs_dilation = w.rhs_dil;
      op.conv = dim_labels(i, rank);
      op.feature_groups = one_int(i, "feature_group_count", 1);
      op.batch_groups = one_int(i, "batch_group_count", 1);
      op.precision = precision(i);
    } else if (opc == "reduce") {
      op.kind = OpKind::reduce;
      op.dims = ints(i, "dimensions");
      op.combiner = combiner(i);
    } else if (opc == "reduce-window") {
      op.kind = OpKind::reduce_window;
      const Window w = window(i, op.type.dims.size());
      op.window = w.size, op.strides = w.stride, op.lo = w.lo, op.hi = w.hi;
      op.lhs_dilation = w.lhs_dil, op.rhs_dilation = w.rhs_dil;
      op.combiner = combiner(i);
    } else if (opc == "gather" || opc == "scatter") {
      indexed_attr(i, op);
    } else if (opc == "select-and-scatter") {
      op.kind = OpKind::select_and_scatter;
      const Window w = window(i, op.type.dims.size());
      for (size_t d = 0; d < w.size.size(); ++d)
        if (w.lhs_dil[d] != 1 || w.rhs_dil[d] != 1) unsupported(i, "select-and-scatter with dilation");
      op.window = w.size, op.strides = w.stride, op.lo = w.lo, op.hi = w.hi;
      op.direction = select_direction(i);
      op.combiner = combiner(i, "scatter");
    } else if (std::find(hlo::xla_opcodes().begin(), hlo::xla_opcodes().end(), opc) == hlo::xla_opcodes().end()) {
      throw Error(fmt::format("{}: unknown operation {}{}{}", where(i), opc, did_you_mean(opc, hlo::xla_opcodes()), from(i)));
    } else {
      unsupported(i, opc);
    }
    try {
      const Type t = infer_type(f_, op);
      if (t != op.type) malformed(i, fmt::format("result {} does not match its operands ({})", op.type.str(), t.str()));
    } catch (const Error& e) {
      const std::string m = e.what();
      if (m.rfind(file_, 0) == 0) throw;
      malformed(i, m);
    }
    return {f_.add(std::move(op))};
  }

  // A float's place in IEEE 754's total order (-NaN < -inf < ... < -0 < +0
  // < ... < inf < NaN) as an s32 that orders the same: its bits, the
  // magnitude's flipped where the sign is set (f16 and bf16 widened
  // exactly to f32 first).
  int total_order_key(int x, const std::string& l) {
    const Type t = f_.ops[size_t(x)].type;
    if (t.dtype != DType::f32) x = emit(OpKind::convert, {x}, {DType::f32, t.dims}, l);
    const Type st{DType::s32, t.dims};
    const int bits = emit(OpKind::bitcast_convert, {x}, st, l);
    const int sign = emit(OpKind::shift_right_arithmetic, {bits, splat(st, 31, l)}, st, l);
    return emit(OpKind::xor_, {bits, emit(OpKind::and_, {sign, splat(st, 0x7fffffff, l)}, st, l)}, st, l);
  }
  int emit(OpKind k, std::vector<int> operands, const Type& t, const std::string& loc) {
    return compiler::rewrite::append(f_, k, std::move(operands), t, loc);
  }
  int slice(int x, std::vector<int64_t> lo, std::vector<int64_t> hi, const std::string& loc) {
    return compiler::rewrite::append_slice(f_, x, std::move(lo), std::move(hi), loc);
  }
  // conditional (lax.cond, lax.switch): branches are pure functions, so
  // every branch is imported and the result selected by the predicate (true:
  // the first) or the index (out of range: the last branch, as XLA); a
  // predicate or index known at compile time imports its branch only.
  std::vector<int> conditional(const Instruction& i, const std::vector<const std::vector<int>*>& tuples) {
    std::vector<const hlo::Computation*> branches;
    std::vector<std::string> names;
    if (const std::string* bc = i.attribute("branch_computations")) {
      std::string cur;
      for (char c : *bc) {
        if (c == '{' || c == '}' || c == ' ') continue;
        if (c == ',') names.push_back(cur), cur.clear();
        else cur += c;
      }
      if (!cur.empty()) names.push_back(cur);
    } else {
      const std::string* t = i.attribute("true_computation");
      const std::string* f = i.attribute("false_computation");
      if (!t || !f) malformed(i, "conditional needs true_computation and false_computation, or branch_computations");
      names = {*t, *f};
    }
    for (const std::string& n : names) {
      const hlo::Computation* c = m_.find(n);
      if (!c) malformed(i, fmt::format("conditional names unknown computation {}", n));
      branches.push_back(c);
    }
    if (branches.empty() || tuples.size() != branches.size() + 1 || tuples[0]->size() != 1) malformed(i, "conditional operands do not match its branches");
    const int sel = (*tuples[0])[0];
    const Type st = f_.ops[size_t(sel)].type;
    const bool by_pred = st.dtype == DType::pred;
    if (!st.dims.empty() || (!by_pred && st.dtype != DType::s32) || (by_pred && branches.size() != 2))
      malformed(i, "conditional selects by a pred (two branches) or an s32 index");
    const int64_t nb = int64_t(branches.size());
    auto branch_of = [&](double v) { return by_pred ? (v != 0 ? 0 : 1) : (v < 0 || v >= double(nb) ? nb - 1 : int64_t(v)); };
    if (const std::optional<double> known = consts_->scalar(sel)) {
      const int64_t b = branch_of(*known);
      return computation(*branches[size_t(b)], {*tuples[size_t(b) + 1]});
    }
    std::vector<std::vector<int>> results;
    for (int64_t b = 0; b < nb; ++b) {
      results.push_back(computation(*branches[size_t(b)], {*tuples[size_t(b) + 1]}));
      if (results.back().size() != results[0].size()) malformed(i, "conditional branches return different values");
      for (size_t k = 0; k < results[0].size(); ++k)
        if (f_.ops[size_t(results.back()[k])].type != f_.ops[size_t(results[0][k])].type) malformed(i, "conditional branches return different types");
    }
    const std::string l = loc(i);
    std::vector<int> out = results[size_t(nb - 1)];
    for (int64_t b = nb - 2; b >= 0; --b) {
      int take = sel;  // pred: true takes branch 0
      if (!by_pred) {
        Op eq;
        eq.kind = OpKind::compare, eq.direction = Direction::EQ, eq.operands = {sel, splat(st, double(b), l)}, eq.type = {DType::pred, {}}, eq.loc = l;
        take = f_.add(std::move(eq));
      }
      for (size_t k = 0; k < out.size(); ++k) {
        const Type t = f_.ops[size_t(out[k])].type;
        int mask = take;
        if (!t.dims.empty()) {
          Op bm;
          bm.kind = OpKind::broadcast, bm.operands = {take}, bm.type = {DType::pred, t.dims}, bm.loc = l;
          mask = f_.add(std::move(bm));
        }
        out[k] = emit(OpKind::select, {mask, results[size_t(b)][k], out[k]}, t, l);
      }
    }
    return out;
  }



  // dynamic-slice and dynamic-update-slice with start indices known at
  // compile time (after loops are unrolled): a slice, or an update at
  // constant starts. Starts are clamped as XLA does.
  int dynamic_slice(const Instruction& i, const std::vector<const std::vector<int>*>& tuples, bool update) {
    std::vector<int> in;
    for (auto* t : tuples) {
      if (t->size() != 1) unsupported(i, fmt::format("tuple operand of {}", i.opcode));
      in.push_back((*t)[0]);
    }
    const size_t first = update ? 2 : 1;
    if (in.size() < first) malformed(i, "missing operands");
    const Type xt = f_.ops[size_t(in[0])].type;
    const size_t r = xt.dims.size();
    std::vector<int64_t> sizes = update ? f_.ops[size_t(in[1])].type.dims : ints(i, "dynamic_slice_sizes");
    if (sizes.size() != r) malformed(i, "slice sizes do not match the operand's rank");
    for (size_t k = 0; k < r; ++k)
      if (sizes[k] < 0 || sizes[k] > xt.dims[k]) malformed(i, "slice larger than the operand");
    const std::string l = loc(i);
    std::vector<int> start;  // one scalar per dimension
    if (in.size() == first + r) {
      start.assign(in.begin() + long(first), in.end());
    } else if (in.size() == first + 1 && r > 0) {  // one index vector
      const Type& it = f_.ops[size_t(in[first])].type;
      if (it.dims.size() != 1 || it.dims[0] != int64_t(r)) malformed(i, "the start index vector does not match the operand's rank");
      for (size_t k = 0; k < r; ++k)
        start.push_back(emit(OpKind::reshape, {slice(in[first], {int64_t(k)}, {int64_t(k) + 1}, l)}, {it.dtype, {}}, l));
    } else {
      malformed(i, "wrong number of start indices");
    }
    std::vector<double> known;
    for (int s : start) {
      const Type& st = f_.ops[size_t(s)].type;
      if (!st.dims.empty() || is_float(st.dtype) || st.dtype == DType::pred) malformed(i, "start indices must be integer scalars");
      if (const auto v = consts_->scalar(s)) known.push_back(*v);
    }
    if (known.size() == r) return compiler::rewrite::append_fixed_dynamic_slice(f_, in[0], update ? in[1] : -1, sizes, known, l);
    Op op;  // a start computed at run time (a loop's counter)
    op.kind = update ? OpKind::dynamic_update_slice : OpKind::dynamic_slice;
    op.operands = update ? std::vector<int>{in[0], in[1]} : std::vector<int>{in[0]};
    op.operands.insert(op.operands.end(), start.begin(), start.end());
    op.type = update ? xt : Type{xt.dtype, sizes};
    op.loc = l;
    return f_.add(std::move(op));
  }

  // Computation c as a function of its own (a loop's region) whose
  // parameters take the values of `state`; imported with a fresh constant
  // folder (its values are not the outer function's).
  Function region(const hlo::Computation& c, const std::vector<int>& state) {
    Function outer = std::move(f_);
    auto outer_consts = std::move(consts_);
    auto outer_tiles = std::move(global_tiles_);
    auto outer_constraints = std::move(constraints_);
    f_ = Function{};
    f_.devices = outer.devices;
    consts_ = std::make_unique<ConstantFolder>(f_);
    global_tiles_.clear();
    constraints_.clear();
    std::vector<int> params;
    for (size_t k = 0; k < state.size(); ++k) {
      Op p;
      p.kind = OpKind::parameter, p.index = int64_t(k), p.type = outer.ops[size_t(state[k])].type, p.loc = outer.ops[size_t(state[k])].loc;
      params.push_back(f_.add(std::move(p)));
    }
    f_.name = c.name;
    std::vector<int> results;
    try {
      results = computation(c, {params});
    } catch (...) {
      f_ = std::move(outer), consts_ = std::move(outer_consts), global_tiles_ = std::move(outer_tiles), constraints_ = std::move(outer_constraints);
      throw;
    }
    f_.results = results;
    Function g = std::move(f_);
    f_ = std::move(outer), consts_ = std::move(outer_consts), global_tiles_ = std::move(outer_tiles), constraints_ = std::move(outer_constraints);
    return g;
  }

  // sort (jnp.sort, argsort, lax.sort of several operands): a bitonic
  // network over the sorted dimension, padded to a power of two P, written
  // in the IR's own ops. In each of its log2(P) (log2(P) + 1) / 2 stages
  // every element meets its partner (the halves of blocks of 2j elements,
  // swapped by a reverse), the comparator's scalar ops run on both as
  // whole tensors, and each operand selects the element or its partner.
  // The elements' first positions travel along and break ties, so the
  // network is stable (is_stable or not: one valid order of an unstable
  // sort) and padding, placed after every element, is cut off at the end.
  std::vector<int> sort(const Instruction& i, const std::vector<const std::vector<int>*>& tuples) {
    const std::string l = loc(i);
    std::vector<int> xs;
    for (auto* t : tuples) {
      if (t->size() != 1) unsupported(i, "sort of tuple operands");
      xs.push_back((*t)[0]);
    }
    if (xs.empty()) malformed(i, "sort needs an operand");
    const std::vector<int64_t> dims = f_.ops[size_t(xs[0])].type.dims;
    for (int x : xs)
      if (f_.ops[size_t(x)].type.dims != dims) malformed(i, "sort operands differ in shape");
    const auto dv = ints(i, "dimensions");
    const int64_t r = int64_t(dims.size());
    if (dv.size() != 1 || dv[0] < 0 || dv[0] >= r) malformed(i, "sort needs one dimension of its operands");
    const int64_t d = dv[0];
    const std::string* name = i.attribute("to_apply");
    const hlo::Computation* c = name ? m_.find(*name) : nullptr;
    if (!c) malformed(i, "missing or unknown to_apply");
    return sorted(xs, d, comparator(i, *c, xs), l);
  }

  // topk (lax.top_k, chlo.top_k): the k largest (or smallest) along the last
  // dimension and their s32 indices, the lower index first among equals;
  // floats in IEEE 754's total order (NaN largest). A sort of (values,
  // positions), cut after k.
  std::vector<int> topk(const Instruction& i, const std::vector<const std::vector<int>*>& tuples) {
    if (tuples.size() != 1 || tuples[0]->size() != 1) malformed(i, "topk takes one operand");
    const int x = (*tuples[0])[0];
    const Type t = f_.ops[size_t(x)].type;
    const int64_t k = one_int(i, "k", -1), r = int64_t(t.dims.size());
    if (r == 0 || k < 0 || k > t.dims.back()) malformed(i, "topk needs an operand of rank 1 or more and 0 <= k <= its last dimension");
    const std::string* largest = i.attribute("largest");
    const bool desc = !largest || *largest == "true";
    const std::string l = loc(i);
    Importer sub(m_, file_);
    int p[4];
    for (int q = 0; q < 4; ++q) {
      Op o;
      o.kind = OpKind::parameter, o.index = q, o.type = {q < 2 ? t.dtype : DType::s32, {}};
      p[q] = sub.f_.add(std::move(o));
    }
    const bool fl = is_float(t.dtype);
    Op gt;
    gt.kind = OpKind::compare, gt.direction = desc ? Direction::GT : Direction::LT, gt.type = {DType::pred, {}}, gt.loc = l;
    gt.operands = {fl ? sub.total_order_key(p[0], l) : p[0], fl ? sub.total_order_key(p[1], l) : p[1]};
    sub.f_.results = {sub.f_.add(std::move(gt))};
    Op io;
    io.kind = OpKind::iota, io.index = r - 1, io.type = {DType::s32, t.dims}, io.loc = l;
    const std::vector<int> both = sorted({x, f_.add(std::move(io))}, r - 1, sub.f_, l);
    std::vector<int64_t> lo(size_t(r), 0), hi = t.dims;
    hi.back() = k;
    return {slice(both[0], lo, hi, l), slice(both[1], lo, hi, l)};
  }

  // xs sorted along dimension d by the comparator `cmp` (of 2 xs.size()
  // scalars: lhs and rhs of each operand in turn).
  std::vector<int> sorted(const std::vector<int>& xs, int64_t d, const Function& cmp, const std::string& l) {
    const std::vector<int64_t> dims = f_.ops[size_t(xs[0])].type.dims;
    const int64_t r = int64_t(dims.size()), n = dims[size_t(d)];
    if (n <= 1) return xs;
    // [n, rest]: the sorted dimension first, the others flattened, so the
    // halves a stage swaps are whole rows of them (moved last, with few
    // rows, the swaps move single elements: 2 to 4 times the cycles).
    std::vector<int64_t> perm = {d}, back(static_cast<size_t>(r));
    for (int64_t k = 0; k < r; ++k)
      if (k != d) perm.push_back(k);
    for (int64_t k = 0; k < r; ++k) back[size_t(perm[size_t(k)])] = k;
    int64_t rows = 1;
    for (int64_t k = 0; k < r; ++k)
      if (k != d) rows *= dims[size_t(k)];
    int64_t P = 1;
    while (P < n) P *= 2;
    auto reshape = [&](int x, std::vector<int64_t> to) { return emit(OpKind::reshape, {x}, {f_.ops[size_t(x)].type.dtype, std::move(to)}, l); };
    auto transpose = [&](int x, const std::vector<int64_t>& p) {
      Type t = f_.ops[size_t(x)].type;
      std::vector<int64_t> to;
      for (int64_t k : p) to.push_back(t.dims[size_t(k)]);
      Op o;
      o.kind = OpKind::transpose, o.operands = {x}, o.dims = p, o.type = {t.dtype, to}, o.loc = l;
      return f_.add(std::move(o));
    };
    const std::vector<int64_t> W = {P, rows};
    std::vector<int> vals;
    for (int x : xs) {
      const DType dt = f_.ops[size_t(x)].type.dtype;
      int v = reshape(d == 0 ? x : transpose(x, perm), {n, rows});
      if (P > n) {
        Op pd;
        pd.kind = OpKind::pad, pd.operands = {v, splat({dt, {}}, 0, l)}, pd.lo = {0, 0}, pd.hi = {P - n, 0}, pd.interior = {0, 0};
        pd.type = {dt, W}, pd.loc = l;
        v = f_.add(std::move(pd));
      }
      vals.push_back(v);
    }
    Op io;
    io.kind = OpKind::iota, io.index = 0, io.type = {DType::s32, W}, io.loc = l;
    vals.push_back(f_.add(std::move(io)));  // each element's first position
    const size_t m = xs.size();
    const Type st{DType::s32, W}, pt{DType::pred, W};
    Op po;
    po.kind = OpKind::iota, po.index = 0, po.type = st, po.loc = l;
    const int pos = f_.add(std::move(po));  // where each element is now
    auto cmpi = [&](Direction dir, int x, int y) {
      Op o;
      o.kind = OpKind::compare, o.direction = dir, o.operands = {x, y}, o.type = pt, o.loc = l;
      return f_.add(std::move(o));
    };
    auto bit = [&](int64_t b) {  // pos & b != 0
      return cmpi(Direction::NE, emit(OpKind::and_, {pos, splat(st, double(b), l)}, st, l), splat(st, 0, l));
    };
    auto both = [&](const std::vector<int>& x, const std::vector<int>& y) {  // the comparator on (x0, y0, x1, y1, ...)
      std::vector<int> args;
      for (size_t q = 0; q < m; ++q) args.push_back(x[q]), args.push_back(y[q]);
      return apply(cmp, args, W, l);
    };
    const int end = P > n ? splat(st, double(n), l) : -1;
    for (int64_t k = 2; k <= P; k *= 2)
      for (int64_t j = k / 2; j >= 1; j /= 2) {
        // Each element meets its partner at position pos ^ j: the halves of
        // blocks of 2j elements, swapped by a reverse.
        std::vector<int> partner;
        for (int v : vals) {
          const Type t = f_.ops[size_t(v)].type;
          Op rv;
          const std::vector<int64_t> four = {P / (2 * j), 2, j, rows};
          rv.kind = OpKind::reverse, rv.operands = {reshape(v, four)}, rv.dims = {1};
          rv.type = {t.dtype, four}, rv.loc = l;
          partner.push_back(reshape(f_.add(std::move(rv)), W));
        }
        // x goes before y: the comparator says x < y, or neither and x came
        // first; padding goes last.
        const int xy = both(vals, partner), yx = both(partner, vals);
        auto before = [&](int lt, int gt, int x_at, int y_at) {
          const int r = emit(OpKind::or_, {lt, emit(OpKind::and_, {emit(OpKind::not_, {gt}, pt, l), cmpi(Direction::LT, x_at, y_at)}, pt, l)}, pt, l);
          if (end < 0) return r;
          return emit(OpKind::and_, {cmpi(Direction::LT, x_at, end), emit(OpKind::or_, {cmpi(Direction::GE, y_at, end), r}, pt, l)}, pt, l);
        };
        // The lower of a pair takes its partner if the partner goes first,
        // the upper if it goes first itself; pairs whose positions have bit
        // k set sort descending.
        int swap = emit(OpKind::select, {bit(j), before(xy, yx, vals[m], partner[m]), before(yx, xy, partner[m], vals[m])}, pt, l);
        if (k < P) swap = emit(OpKind::xor_, {swap, bit(k)}, pt, l);
        for (size_t q = 0; q < vals.size(); ++q) vals[q] = emit(OpKind::select, {swap, partner[q], vals[q]}, f_.ops[size_t(vals[q])].type, l);
      }
    std::vector<int> out;
    std::vector<int64_t> moved;
    for (int64_t k : perm) moved.push_back(dims[size_t(k)]);
    for (size_t q = 0; q < m; ++q) {
      const int v = reshape(P > n ? slice(vals[q], {0, 0}, {n, rows}, l) : vals[q], moved);
      out.push_back(d == 0 ? v : transpose(v, back));
    }
    return out;
  }

  // A sort's comparator, imported on its own over scalars of its operands'
  // types (lhs and rhs of each operand in turn): element-wise ops and
  // scalar constants, returning one pred.
  Function comparator(const Instruction& i, const hlo::Computation& c, const std::vector<int>& xs) const {
    Importer sub(m_, file_);
    std::vector<std::vector<int>> args;
    for (size_t k = 0; k < 2 * xs.size(); ++k) {
      Op p;
      p.kind = OpKind::parameter, p.index = int64_t(k), p.type = {f_.ops[size_t(xs[k / 2])].type.dtype, {}};
      args.push_back({sub.f_.add(std::move(p))});
    }
    sub.f_.results = sub.computation(c, args);
    if (sub.f_.results.size() != 1 || sub.f_.ops[size_t(sub.f_.results[0])].type != Type{DType::pred, {}})
      malformed(i, "a sort comparator returns one pred[]");
    for (const Op& o : sub.f_.ops) {
      const bool ok = o.kind == OpKind::parameter || (o.kind == OpKind::constant && o.literal.size() == 1) ||
                      ((o.kind == OpKind::broadcast || o.kind == OpKind::reshape) && o.type.dims.empty()) || is_elementwise(o.kind);
      if (!ok || !o.type.dims.empty()) unsupported(i, fmt::format("sort comparator with {}", op_name(o.kind)));
    }
    return std::move(sub.f_);
  }

  // The comparator's ops on tensors of `dims` (its scalars, splat).
  int apply(const Function& g, const std::vector<int>& args, const std::vector<int64_t>& dims, const std::string& l) {
    std::vector<int> at(g.ops.size(), -1);
    for (size_t k = 0; k < g.ops.size(); ++k) {
      const Op& o = g.ops[k];
      if (o.kind == OpKind::parameter) {
        at[k] = args.at(size_t(o.index));
      } else if (o.kind == OpKind::constant) {
        at[k] = splat({o.type.dtype, dims}, o.literal[0], l);
      } else if (o.kind == OpKind::broadcast || o.kind == OpKind::reshape) {
        at[k] = at[size_t(o.operands[0])];
      } else {
        Op e = o;
        for (int& x : e.operands) x = at[size_t(x)];
        e.type.dims = dims, e.loc = l;
        at[k] = f_.add(std::move(e));
      }
    }
    return at[size_t(g.results[0])];
  }

  // The combiners of a variadic reduce whose region combines each operand
  // with its own accumulator alone (result k = f_k(parameter k, parameter
  // n + k), f_k one add/multiply/maximum/minimum/and/or): n reduces in one.
  std::optional<std::vector<Combiner>> separable(const Instruction& i, size_t n) const {
    const std::string* name = i.attribute("to_apply");
    const hlo::Computation* c = name ? m_.find(*name) : nullptr;
    const Instruction* r = c ? c->root() : nullptr;
    if (!r || r->opcode != "tuple" || r->operands.size() != n) return std::nullopt;
    std::vector<Combiner> out;
    for (size_t k = 0; k < n; ++k) {
      const Instruction* x = c->find(r->operands[k]);
      const auto comb = x ? combiner_named(x->opcode) : std::nullopt;
      if (!comb || x->operands.size() != 2) return std::nullopt;
      std::vector<std::string> params;
      for (const std::string& o : x->operands) {
        const Instruction* p = c->find(o);
        if (!p || p->opcode != "parameter") return std::nullopt;
        params.push_back(p->literal);
      }
      std::sort(params.begin(), params.end(), [](const std::string& a, const std::string& b) { return std::stoll(a) < std::stoll(b); });
      if (params != std::vector<std::string>{std::to_string(k), std::to_string(n + k)}) return std::nullopt;
      out.push_back(*comb);
    }
    return out;
  }

  // The dimensions of x a reduce over `dims` keeps.
  static std::vector<int64_t> kept_dims(const Type& x, const std::vector<int64_t>& dims) {
    std::vector<int64_t> kept;
    for (size_t d = 0; d < x.dims.size(); ++d)
      if (std::find(dims.begin(), dims.end(), int64_t(d)) == dims.end()) kept.push_back(x.dims[d]);
    return kept;
  }

  // A reduce of several operands: n reduces where separable() says so, else
  // (values, indices) pairs whose to_apply behaves like JAX's argmax or
  // argmin (the extreme value, NaN first; among equal values the smallest
  // index): told apart by running the region, imported on its own, through
  // the interpreter on probe pairs. Lowered to a max/min reduce and a min
  // reduce of the indices where the value equals it (or is NaN).
  std::vector<int> arg_reduce(const Instruction& i, const std::vector<const std::vector<int>*>& tuples) {
    for (const auto* t : tuples)
      if (t->size() != 1) unsupported(i, "reduce of tuple operands");
    if (tuples.size() % 2 == 0) {
      if (const auto cs = separable(i, tuples.size() / 2)) {
        const size_t n = tuples.size() / 2;
        const auto dims = ints(i, "dimensions");
        std::vector<int> out;
        for (size_t k = 0; k < n; ++k) {
          const int x = (*tuples[k])[0], init = (*tuples[n + k])[0];
          const Type xt = f_.ops[size_t(x)].type;
          if (f_.ops[size_t(init)].type != Type{xt.dtype, {}} || (k && xt.dims != f_.ops[size_t((*tuples[0])[0])].type.dims))
            malformed(i, "reduce operands of other shapes or inits of other types");
          Op r;
          r.kind = OpKind::reduce, r.operands = {x, init}, r.dims = dims, r.combiner = (*cs)[k], r.type = {xt.dtype, kept_dims(xt, dims)};
          r.loc = loc(i);
          out.push_back(f_.add(std::move(r)));
        }
        return out;
      }
    }
    if (tuples.size() != 4) unsupported(i, "reduce of several operands other than (values, indices) or each combined with its own");
    int in[4];
    for (size_t k = 0; k < 4; ++k) in[k] = (*tuples[k])[0];
    const Type vt = f_.ops[in[0]].type, it = f_.ops[in[1]].type;
    if (it.dtype != DType::s32 || it.dims != vt.dims || f_.ops[in[2]].type != Type{vt.dtype, {}} || f_.ops[in[3]].type != Type{DType::s32, {}} ||
        vt.dtype == DType::pred)
      unsupported(i, "reduce of several operands other than (values, s32 indices)");
    if (vt.dtype == DType::u32) unsupported(i, "argmax or argmin of u32 values");
    const std::string* name = i.attribute("to_apply");
    const hlo::Computation* c = name ? m_.find(*name) : nullptr;
    if (!c) malformed(i, "missing or unknown to_apply");
    const int kind = classify_arg_region(*c, vt.dtype);
    if (kind == 0) unsupported(i, fmt::format("reduce of (values, indices) whose to_apply ({}) is not an argmax or argmin", *name));
    const bool is_max = kind > 0;
    const std::string l = loc(i);
    const auto dims = ints(i, "dimensions");
    const std::vector<int64_t> kept = kept_dims(vt, dims);
    // The values' extreme, and its index (lower-arg-reduce writes it in
    // the VPU's ops).
    const Combiner cb = is_max ? Combiner::maximum : Combiner::minimum;
    Op r;
    r.kind = OpKind::reduce, r.operands = {in[0], in[2]}, r.dims = dims, r.combiner = cb, r.type = {vt.dtype, kept}, r.loc = l;
    const int m = f_.add(std::move(r));
    Op a;
    a.kind = OpKind::arg_reduce, a.operands = {in[0], in[1], in[2], in[3]}, a.dims = dims, a.combiner = cb, a.type = {DType::s32, kept};
    a.loc = l;
    return {m, f_.add(std::move(a))};
  }

  // +1: the region (v0, i0, v1, i1) -> (v, i) is argmax-like, -1 argmin-like, 0 neither.
  int classify_arg_region(const hlo::Computation& c, DType vdt) const {
    Importer sub(m_, file_);
    std::vector<std::vector<int>> args;
    for (int k = 0; k < 4; ++k) {
      Op p;
      p.kind = OpKind::parameter, p.index = k, p.type = {k % 2 ? DType::s32 : vdt, {}};
      args.push_back({sub.f_.add(std::move(p))});
    }
    std::vector<int> res;
    try {
      res = sub.computation(c, args);
    } catch (const Error&) {
      return 0;
    }
    if (res.size() != 2) return 0;
    sub.f_.results = res;
    auto run = [&](double v0, double i0, double v1, double i1) {
      auto scalar = [](DType d, double v) {
        Tensor t;
        t.type = {d, {}}, t.v = {v};
        return t;
      };
      const auto out = interpret(sub.f_, {scalar(vdt, v0), scalar(DType::s32, i0), scalar(vdt, v1), scalar(DType::s32, i1)});
      return std::pair<double, double>{out[0].v[0], out[1].v[0]};
    };
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (int sign : {1, -1}) {
      // (acc value, acc index, new value, new index) -> expected (value, index)
      const double hi = sign > 0 ? 2 : 1, lo = sign > 0 ? 1 : 2;
      struct Probe {
        double v0, i0, v1, i1, v, i;
      };
      std::vector<Probe> probes = {{lo, 5, hi, 3, hi, 3}, {hi, 5, lo, 3, hi, 5}, {hi, 5, hi, 3, hi, 3}, {hi, 3, hi, 5, hi, 3}};
      if (is_float(vdt)) probes.push_back({nan, 5, hi, 3, nan, 5}), probes.push_back({hi, 5, nan, 3, nan, 3});
      bool ok = true;
      try {
        for (const Probe& p : probes) {
          const auto [v, idx] = run(p.v0, p.i0, p.v1, p.i1);
          ok &= (std::isnan(p.v) ? std::isnan(v) : v == p.v) && idx == p.i;
        }
      } catch (const Error&) {
        ok = false;
      }
      if (ok) return sign;
    }
    return 0;
  }

  int splat(const Type& t, double v, const std::string& loc) { return compiler::rewrite::append_splat(f_, t, v, loc); }
  // A reduce-window of (values, payloads) whose region keeps the pair one
  // compare of the values picks (JAX's select_and_gather_add, max-pooling's
  // tangent): each window folded in row-major order from the inits, the
  // region's compare and selects taken as written; both operands padded
  // with their inits. Dilations are refused.
  std::vector<int> windowed_select(const Instruction& i, const std::vector<const std::vector<int>*>& tuples) {
    auto refuse = [&] {
      unsupported(i, "tuple-shaped reduce-window other than (values, payloads) kept in pairs by one compare of the values");
    };
    if (tuples.size() != 4) refuse();
    for (const auto* t : tuples)
      if (t->size() != 1) refuse();
    const int v = (*tuples[0])[0], p = (*tuples[1])[0], iv = (*tuples[2])[0], ip = (*tuples[3])[0];
    const Type vt = f_.ops[size_t(v)].type, pt = f_.ops[size_t(p)].type;
    if (pt.dims != vt.dims || f_.ops[size_t(iv)].type != Type{vt.dtype, {}} || f_.ops[size_t(ip)].type != Type{pt.dtype, {}}) refuse();
    // The region: (a0, a1) the pair so far, (a2, a3) the next; root
    // (select(c, x, y), select(c, x', y')) with c = compare(a, b).
    const std::string* name = i.attribute("to_apply");
    const hlo::Computation* c = name ? m_.find(*name) : nullptr;
    const Instruction* r = c ? c->root() : nullptr;
    if (!r || r->opcode != "tuple" || r->operands.size() != 2) refuse();
    auto param = [&](const std::string& n) -> int {
      const Instruction* x = c->find(n);
      return x && x->opcode == "parameter" ? std::stoi(x->literal) : -1;
    };
    const Instruction* s0 = c->find(r->operands[0]);
    const Instruction* s1 = c->find(r->operands[1]);
    if (!s0 || !s1 || s0->opcode != "select" || s1->opcode != "select" || s0->operands.size() != 3 || s1->operands.size() != 3 ||
        s0->operands[0] != s1->operands[0])
      refuse();
    const Instruction* cmp = c->find(s0->operands[0]);
    if (!cmp || cmp->opcode != "compare" || cmp->operands.size() != 2) refuse();
    const int c0 = param(cmp->operands[0]), c1 = param(cmp->operands[1]);
    const int v0 = param(s0->operands[1]), v1 = param(s0->operands[2]), q0 = param(s1->operands[1]), q1 = param(s1->operands[2]);
    const bool acc_first = v0 == 0 && v1 == 2 && q0 == 1 && q1 == 3, new_first = v0 == 2 && v1 == 0 && q0 == 3 && q1 == 1;
    if (!(acc_first || new_first) || !((c0 == 0 && c1 == 2) || (c0 == 2 && c1 == 0))) refuse();
    const auto dir = direction_named(cmp->attribute("direction"));
    if (!dir) refuse();
    const size_t rank = vt.dims.size();
    const Window w = window(i, rank);
    for (size_t d = 0; d < rank; ++d)
      if (w.lhs_dil[d] != 1 || w.rhs_dil[d] != 1) unsupported(i, "tuple-shaped reduce-window with dilation");
    const std::string l = loc(i);
    std::vector<int64_t> padded(rank), out(rank);
    for (size_t d = 0; d < rank; ++d) {
      padded[d] = vt.dims[d] + w.lo[d] + w.hi[d];
      if (w.stride[d] < 1 || w.size[d] < 1 || padded[d] < w.size[d]) malformed(i, "a window larger than its padded operand");
      out[d] = (padded[d] - w.size[d]) / w.stride[d] + 1;
    }
    auto pad = [&](int x, int init) {
      Op o;
      o.kind = OpKind::pad, o.operands = {x, init}, o.lo = w.lo, o.hi = w.hi, o.interior.assign(rank, 0), o.loc = l;
      o.type = {f_.ops[size_t(x)].type.dtype, padded};
      return f_.add(std::move(o));
    };
    const int vp = pad(v, iv), pp = pad(p, ip);
    int acc_v = compiler::rewrite::append(f_, OpKind::broadcast, {iv}, {vt.dtype, out}, l);
    int acc_p = compiler::rewrite::append(f_, OpKind::broadcast, {ip}, {pt.dtype, out}, l);
    for (const auto& tap : compiler::rewrite::window_offsets(w.size, l, i.opcode)) {
      auto view = [&](int x) {
        Op s;
        s.kind = OpKind::slice, s.operands = {x}, s.lo = tap, s.strides = w.stride, s.loc = l;
        for (size_t d = 0; d < rank; ++d) s.hi.push_back(tap[d] + (out[d] - 1) * w.stride[d] + 1);
        s.type = {f_.ops[size_t(x)].type.dtype, out};
        return f_.add(std::move(s));
      };
      const int xv = view(vp), xp = view(pp);
      Op k;
      k.kind = OpKind::compare, k.direction = *dir, k.operands = c0 == 0 ? std::vector<int>{acc_v, xv} : std::vector<int>{xv, acc_v};
      k.type = {DType::pred, out}, k.loc = l;
      const int keep = f_.add(std::move(k));
      auto pick = [&](int acc, int x, const Type& t) {
        return compiler::rewrite::append(f_, OpKind::select, acc_first ? std::vector<int>{keep, acc, x} : std::vector<int>{keep, x, acc}, t, l);
      };
      acc_v = pick(acc_v, xv, {vt.dtype, out}), acc_p = pick(acc_p, xp, {pt.dtype, out});
    }
    return {acc_v, acc_p};
  }

  // triangular-solve: op(a) x = b (left_side) or x op(a) = b, op(a) = a or
  // its transpose (ADJOINT of real values too), a's lower or upper triangle
  // (the other is not read), its diagonal taken as ones with unit_diagonal.
  // Substitution unrolled over the n rows (or columns) of x, in order from
  // the one that needs no other: x_i = (b_i - sum_j op(a)_ij x_j) / op(a)_ii,
  // each a slice of b and a's element broadcast over it. Up to 64 rows.
  int triangular_solve(const Instruction& i, int a, int b) {
    const Type at = f_.ops[size_t(a)].type, bt = f_.ops[size_t(b)].type;
    const size_t rank = at.dims.size();
    if (!is_float(at.dtype) || bt.dtype != at.dtype || rank < 2 || bt.dims.size() != rank || at.dims[rank - 1] != at.dims[rank - 2])
      malformed(i, "triangular-solve takes a square float a[..., n, n] and b of its type and rank");
    auto flag = [&](const char* k) {
      const std::string* v = i.attribute(k);
      if (!v || (*v != "true" && *v != "false")) malformed(i, fmt::format("triangular-solve needs {}=true or false", k));
      return *v == "true";
    };
    const bool left = flag("left_side"), lower = flag("lower"), unit = flag("unit_diagonal");
    const std::string* ta = i.attribute("transpose_a");
    const bool trans = ta && (*ta == "TRANSPOSE" || *ta == "ADJOINT");
    if (ta && !trans && *ta != "NO_TRANSPOSE") malformed(i, fmt::format("transpose_a={}", *ta));
    const int64_t n = at.dims[rank - 1];
    for (size_t d = 0; d + 2 < rank; ++d)
      if (bt.dims[d] != at.dims[d]) malformed(i, "triangular-solve operands of other batch dimensions");
    if (bt.dims[left ? rank - 2 : rank - 1] != n) malformed(i, "triangular-solve: b does not match a's size");
    if (n > 64) unsupported(i, fmt::format("triangular-solve of {} rows (unrolled: up to 64)", n));
    const std::string l = loc(i);
    // x's line j (a row where left, a column where right) has shape `line`.
    std::vector<int64_t> line = bt.dims;
    line[left ? rank - 2 : rank - 1] = 1;
    const Type lt{bt.dtype, line};
    auto slice = [&](int x, int64_t r0, int64_t c0, const std::vector<int64_t>& dims) {
      std::vector<int64_t> lo(rank, 0), hi = dims;
      lo[rank - 2] = r0, lo[rank - 1] = c0;
      hi[rank - 2] = r0 + dims[rank - 2], hi[rank - 1] = c0 + dims[rank - 1];
      return compiler::rewrite::append_slice(f_, x, lo, hi, l);
    };
    auto line_of = [&](int x, int64_t j) {
      std::vector<int64_t> d = line;
      return left ? slice(x, j, 0, d) : slice(x, 0, j, d);
    };
    // op(a)_jk broadcast over a line: a[..., j, k] or a[..., k, j], [batch..., 1, 1] -> line.
    std::vector<int64_t> keep;
    for (size_t d = 0; d < rank; ++d) keep.push_back(int64_t(d));
    auto element = [&](int64_t j, int64_t k) {
      std::vector<int64_t> one = at.dims;
      one[rank - 2] = one[rank - 1] = 1;
      const int e = trans ? slice(a, k, j, one) : slice(a, j, k, one);
      Op bc;
      bc.kind = OpKind::broadcast, bc.operands = {e}, bc.dims = keep, bc.type = lt, bc.loc = l;
      return f_.add(std::move(bc));
    };
    auto bin = [&](OpKind k, int x, int y) { return compiler::rewrite::append(f_, k, {x, y}, lt, l); };
    // op(a)'s triangle: lower where a's is lower and not transposed, or upper and transposed.
    const bool eff_lower = lower != trans;
    // Left: row j of x needs the rows k with op(a)_jk != 0, k != j (k < j where lower).
    // Right: column j of x needs the columns k with op(a)_kj != 0 (k > j where lower).
    const bool ascending = left ? eff_lower : !eff_lower;
    std::vector<int> x(size_t(n), -1);
    for (int64_t s = 0; s < n; ++s) {
      const int64_t j = ascending ? s : n - 1 - s;
      int acc = line_of(b, j);
      for (int64_t t = 0; t < s; ++t) {
        const int64_t k = ascending ? t : n - 1 - t;
        acc = bin(OpKind::subtract, acc, bin(OpKind::multiply, x[size_t(k)], left ? element(j, k) : element(k, j)));
      }
      x[size_t(j)] = unit ? acc : bin(OpKind::divide, acc, element(j, j));
    }
    if (n == 1) return x[0];
    Op cat;
    cat.kind = OpKind::concatenate, cat.operands = x, cat.index = int64_t(left ? rank - 2 : rank - 1), cat.type = bt, cat.loc = l;
    return f_.add(std::move(cat));
  }

  // reduce-precision to E exponent and M mantissa bits, as XLA: the f32
  // bits (bf16 and f16 widened, exactly) rounded to M bits to nearest even
  // (a bias of half the dropped part, less one, plus the last kept bit),
  // then, where E is narrower than the type's, beyond the largest exponent
  // to +-inf and at or below the smallest normal's to +-0; NaN stays.
  int reduce_precision(const Instruction& i, int x) {
    const Type t = f_.ops[size_t(x)].type;
    if (!is_float(t.dtype)) unsupported(i, fmt::format("reduce-precision of {}", dtype_name(t.dtype)));
    const int64_t e = one_int(i, "exponent_bits", -1), m = one_int(i, "mantissa_bits", -1);
    if (e < 1 || m < 0) malformed(i, "reduce-precision needs exponent_bits >= 1 and mantissa_bits >= 0");
    const int src_e = t.dtype == DType::f16 ? 5 : 8, src_m = t.dtype == DType::f32 ? 23 : t.dtype == DType::bf16 ? 7 : 10;
    if (e >= src_e && m >= src_m) return x;
    const std::string l = loc(i);
    const Type ft{DType::f32, t.dims}, it{DType::s32, t.dims};
    auto op1 = [&](OpKind k, int a, const Type& rt) { return compiler::rewrite::append(f_, k, {a}, rt, l); };
    auto op2 = [&](OpKind k, int a, int b) { return compiler::rewrite::append(f_, k, {a, b}, it, l); };
    auto k = [&](double v) { return splat(it, v, l); };
    auto cmp = [&](Direction d, int a, int b) {
      Op c;
      c.kind = OpKind::compare, c.direction = d, c.operands = {a, b}, c.type = {DType::pred, t.dims}, c.loc = l;
      return f_.add(std::move(c));
    };
    auto sel = [&](int p, int a, int b) { return compiler::rewrite::append(f_, OpKind::select, {p, a, b}, it, l); };
    const int xf = t.dtype == DType::f32 ? x : op1(OpKind::convert, x, ft);
    int bits = op1(OpKind::bitcast_convert, xf, it);
    if (m < src_m) {
      const int shift = 23 - int(m);
      const double last = std::ldexp(1.0, shift);
      const int last_bit = op2(OpKind::shift_right_logical, op2(OpKind::and_, bits, k(last)), k(shift));
      bits = op2(OpKind::and_, op2(OpKind::add, bits, op2(OpKind::add, last_bit, k(last / 2 - 1))), k(-last));
    }
    if (e < src_e) {
      const int64_t bias = (int64_t(1) << (e - 1)) - 1;
      const int exponent = op2(OpKind::and_, bits, k(2139095040.0));  // 0x7f800000
      const int sign = op2(OpKind::and_, bits, k(-2147483648.0));
      bits = sel(cmp(Direction::GT, exponent, k(double((127 + bias) << 23))), op2(OpKind::or_, sign, k(2139095040.0)),
                 sel(cmp(Direction::LE, exponent, k(double((127 - bias) << 23))), sign, bits));
    }
    int r = op1(OpKind::bitcast_convert, bits, ft);
    r = compiler::rewrite::append(f_, OpKind::select, {cmp(Direction::NE, xf, xf), xf, r}, ft, l);
    return t.dtype == DType::f32 ? r : op1(OpKind::convert, r, t);
  }

  // popcnt: the bits counted in pairs, nibbles and bytes at once (x - ((x
  // >> 1) & 0x55..), then masks of 0x33.. and 0x0f..; logical shifts of
  // the type's bits), and for 32 bits the four byte counts summed by a
  // multiply by 0x01010101 into the top byte.
  int popcnt(const Instruction& i, int x) {
    const Type t = f_.ops[size_t(x)].type;
    if (t.dtype != DType::s32 && t.dtype != DType::u32 && t.dtype != DType::s8) unsupported(i, fmt::format("popcnt of {}", dtype_name(t.dtype)));
    const std::string l = loc(i);
    const bool byte = t.dtype == DType::s8;
    auto k = [&](double v32, double v8) { return splat(t, byte ? v8 : v32, l); };
    auto op = [&](OpKind kind, int a, int b) { return compiler::rewrite::append(f_, kind, {a, b}, t, l); };
    auto shr = [&](int a, double n) { return op(OpKind::shift_right_logical, a, k(n, n)); };
    int v = op(OpKind::subtract, x, op(OpKind::and_, shr(x, 1), k(1431655765, 85)));
    v = op(OpKind::add, op(OpKind::and_, v, k(858993459, 51)), op(OpKind::and_, shr(v, 2), k(858993459, 51)));
    v = op(OpKind::and_, op(OpKind::add, v, shr(v, 4)), k(252645135, 15));
    return byte ? v : shr(op(OpKind::multiply, v, k(16843009, 1)), 24);
  }

  // What an instruction computes must be what its shape declares (a
  // get-tuple-element of the wrong element, a region parameter of the wrong
  // type, a call whose callee returns something else).
  void check_declared_shape(const Instruction& i, const std::vector<int>& values) const {
    std::vector<const hlo::Shape*> want;
    std::vector<const hlo::Shape*> pending = {&i.shape};
    while (!pending.empty()) {
      const hlo::Shape* s = pending.back();
      pending.pop_back();
      if (!s->tuple) {
        want.push_back(s);
        continue;
      }
      for (auto e = s->elements.rbegin(); e != s->elements.rend(); ++e) pending.push_back(&*e);
    }
    if (want.size() != values.size())
      malformed(i, fmt::format("its shape {} declares {} value(s), the {} computes {}", i.shape.to_string(), want.size(), i.opcode,
                               values.size()));
    for (size_t k = 0; k < want.size(); ++k) {
      Type got = f_.ops[values[k]].type;
      if (auto it = global_tiles_.find(values[k]); it != global_tiles_.end()) got = tiled_type(got, it->second.first);  // made global
      if (want[k]->dtype != dtype_name(got.dtype) || want[k]->dims != got.dims)
        malformed(i, fmt::format("its shape {} does not match the {} computed{}", want[k]->to_string(), got.str(),
                                 want.size() > 1 ? fmt::format(" (tuple element {})", k) : std::string()));
    }
  }

  std::vector<size_t> tuple_leaf_counts(const Instruction& i) {
    // The operand's HLO shape tells how many leaves each element holds.
    const Instruction* src = current_.back()->find(i.operands[0]);
    if (!src || !src->shape.tuple) malformed(i, "get-tuple-element of a non-tuple");
    std::vector<size_t> n;
    for (const auto& e : src->shape.elements) n.push_back(leaves(e));
    return n;
  }
  static size_t leaves(const hlo::Shape& s) {
    if (!s.tuple) return 1;
    size_t n = 0;
    for (const auto& e : s.elements) n += leaves(e);
    return n;
  }

  void slice_attr(const Instruction& i, Op& op) const {
    const std::string* s = i.attribute("slice");
    if (!s) malformed(i, "missing slice");
    size_t p = 0;
    while ((p = s->find('[', p)) != std::string::npos) {
      const size_t e = s->find(']', p);
      if (e == std::string::npos) malformed(i, "bad slice");
      std::string part = s->substr(p + 1, e - p - 1);
      std::vector<int64_t> v;
      size_t q = 0;
      while (q <= part.size()) {
        size_t c = part.find(':', q);
        if (c == std::string::npos) c = part.size();
        try {
          v.push_back(std::stoll(part.substr(q, c - q)));
        } catch (...) {
          malformed(i, "bad slice");
        }
        q = c + 1;
      }
      if (v.size() < 2 || v.size() > 3) malformed(i, "bad slice");
      op.lo.push_back(v[0]), op.hi.push_back(v[1]), op.strides.push_back(v.size() == 3 ? v[2] : 1);
      p = e;
    }
  }

  // gather's and scatter's dimension numbers (XLA's names); scatter's
  // to_apply is a combiner or returns the update (replace).
  void indexed_attr(const Instruction& i, Op& op) const {
    const bool g = i.opcode == "gather";
    op.kind = g ? OpKind::gather : OpKind::scatter;
    if (!g && op.operands.size() > 3) unsupported(i, "scatter of several operands");
    if (op.operands.size() != (g ? 2u : 3u)) malformed(i, fmt::format("{} takes {} operands", i.opcode, g ? 2 : 3));
    GatherDims& d = op.gather;
    d.offset = ints(i, g ? "offset_dims" : "update_window_dims");
    d.collapsed = ints(i, g ? "collapsed_slice_dims" : "inserted_window_dims");
    d.start_index_map = ints(i, g ? "start_index_map" : "scatter_dims_to_operand_dims");
    d.operand_batching = ints(i, g ? "operand_batching_dims" : "input_batching_dims", false);
    d.index_batching = ints(i, g ? "start_indices_batching_dims" : "scatter_indices_batching_dims", false);
    d.index_vector_dim = one_int(i, "index_vector_dim", int64_t(f_.ops[size_t(op.operands[1])].type.dims.size()));
    if (g) {
      d.slice_sizes = ints(i, "slice_sizes");
      return;
    }
    const std::string* name = i.attribute("to_apply");
    const hlo::Computation* c = name ? m_.find(*name) : nullptr;
    const Instruction* root = c ? c->root() : nullptr;
    op.combiner = root && root->opcode == "parameter" && root->literal == "1" ? Combiner::replace : combiner(i);
  }

  void pad_attr(const Instruction& i, Op& op) const {
    const std::string* s = i.attribute("padding");
    if (!s) malformed(i, "missing padding");
    if (s->empty()) return;  // a rank-0 operand
    for (const auto& d : int_grid(i, *s, 2, 3, "padding"))
      op.lo.push_back(d[0]), op.hi.push_back(d[1]), op.interior.push_back(d.size() == 3 ? d[2] : 0);
  }

  const hlo::Module& m_;
  std::vector<std::pair<std::string, int64_t>> mesh_;  // Shardy's mesh: axis names and sizes
  Mesh mesh() const {
    Mesh m;
    for (const auto& [name, n] : mesh_) m.sizes.push_back(n);
    return m;
  }
  // Values LocalToGlobalShape made global: their tiles, and the tile each device holds (none: tile d).
  std::map<int, std::pair<std::vector<int64_t>, std::vector<int64_t>>> global_tiles_;
  std::map<int, std::vector<int64_t>> constraints_;  // with_sharding_constraint: value -> its mesh axes by dimension
  std::string file_;
  Function f_;
  // Values the program computes from constants only (loop conditions,
  // dynamic-slice starts).
  std::unique_ptr<ConstantFolder> consts_ = std::make_unique<ConstantFolder>(f_);
  int depth_ = 0;
  std::vector<const hlo::Computation*> current_;
};

}  // namespace

Function import_hlo(const hlo::Module& m, std::string_view filename) { return Importer(m, filename).run(); }

}  // namespace tpu::ir

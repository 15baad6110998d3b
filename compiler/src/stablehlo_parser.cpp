// StableHLO text -> hlo::Module (see tpu/hlo/stablehlo.h). One pass over the
// characters: every op, pretty or generic, is read into one form (Op: name,
// operands, attributes under their generic names, regions, types) and then
// written as HLO instructions in the computation being built. Regions become
// computations; a region that uses a value of an enclosing one gets it as an
// extra parameter (a tuple element for while, conditional branches).
#include "tpu/hlo/stablehlo.h"
#include "tpu/hlo/hlo.h"
#include "tpu/isa/suggest.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>

namespace tpu::hlo {
namespace {

constexpr int kMaxDepth = 64;  // regions, attribute and literal nesting

// An attribute value. Lists and dicts are parsed; anything else keeps its
// text (a word, a number, a string's contents, a symbol without '@', a
// dense literal's inside, a dialect attribute's inside).
struct Attr {
  enum Kind { word, number, string, symbol, list, dict, dense, dialect } kind = word;
  std::string text;     // word/number/string/symbol; dense: inside of dense<>; dialect: inside of <>
  std::string name;     // dialect: "#stablehlo.dot", "#stablehlo", "array"
  std::vector<Attr> items;                             // list; array<i64: ...>
  std::vector<std::pair<std::string, Attr>> fields;    // dict; dialect attributes of key = value
  std::optional<Shape> type;                           // dense: the type after it

  static Attr leaf(Kind k, std::string text, std::string name = "") {
    Attr a;
    a.kind = k, a.text = std::move(text), a.name = std::move(name);
    return a;
  }
  const Attr* field(std::string_view k) const {
    for (const auto& [key, v] : fields)
      if (key == k) return &v;
    return nullptr;
  }
};

struct Value {
  std::string name;  // the HLO instruction holding it
  Shape shape;
};

// One op in the common form both syntaxes are read into.
struct Op {
  std::string name;  // "stablehlo.add"
  std::vector<std::pair<std::string, int>> results;  // SSA names and result counts
  std::vector<std::string> operands;                  // SSA names as written
  std::vector<std::pair<std::string, Attr>> attrs;
  std::vector<std::string> regions;                   // computation names
  std::vector<Shape> result_types;
  std::string callee;                                 // call, custom_call target, composite
  int line = 0, col = 0;
  std::string source;

  const Attr* attr(std::string_view k) const {
    for (const auto& [key, v] : attrs)
      if (key == k) return &v;
    return nullptr;
  }
  int nresults() const {
    int n = 0;
    for (const auto& r : results) n += r.second;
    return n;
  }
};

std::string dtype_of(std::string_view t) {
  static const std::map<std::string_view, const char*> names = {
      {"f32", "f32"}, {"bf16", "bf16"}, {"f16", "f16"}, {"f64", "f64"}, {"i1", "pred"},   {"i8", "s8"},
      {"i16", "s16"}, {"i32", "s32"},   {"i64", "s64"}, {"ui8", "u8"},  {"ui16", "u16"}, {"ui32", "u32"},
      {"ui64", "u64"}};
  auto it = names.find(t);
  return it == names.end() ? std::string(t) : it->second;
}

// A scope being built: a function body or a region.
struct Scope {
  Computation comp;
  std::map<std::string, Value> values;  // SSA name -> value
  Scope* parent = nullptr;
  // How the region receives values of enclosing scopes: as new parameters
  // (functions: none allowed), or as elements of its one tuple parameter.
  enum class Capture { none, scalar_params, tuple } capture = Capture::none;
  struct Captured {
    std::string outer;  // SSA name in the parent
    Value parent_value;
  };
  std::shared_ptr<std::vector<Captured>> captures;  // shared by while's cond and body
  size_t capture_base = 0;                          // tuple index of the first capture
  std::string tuple_param;                          // its parameter's name
  std::map<std::string, std::string> captured_here;  // outer SSA name -> local gte name
  int counter = 0;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view file) : s_(text), file_(file) {
    for (size_t i = 0; i < s_.size(); ++i)
      if (s_[i] == '\n') line_starts_.push_back(i + 1);
    scan_loc_aliases();
  }

  Module run() {
    for (ws(); peek() == '#'; ws())  // #loc aliases before the module (read up front)
      while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
    // One module, or several (StableHLO's tests split at "// -----", each
    // part a module of its own or bare functions): their functions share
    // one namespace.
    for (ws(); pos_ < s_.size(); ws()) {
      if (keyword("module")) {
        ws();
        if (peek() == '@') {
          const std::string name = symbol();
          if (module_name_.empty()) module_name_ = name;
        }
        ws();
        if (keyword("attributes")) dict();  // mhlo.num_partitions and the like: the mesh says
        expect('{');
        body_of_module('}');
        expect('}');
        opt_loc();
      } else if (starts_with("\"builtin.module\"")) {
        string_lit();
        expect('(');
        expect(')');
        if (accept('<')) {
          expect('{');
          dict_rest();
          expect('>');
        }
        expect('(');
        expect('{');
        body_of_module('}');
        expect('}');
        expect(')');
        ws();
        if (peek() == '{') dict();
        expect(':');
        skip_type_signature();
        opt_loc();
      } else if (peek() == '#') {  // #loc aliases (read up front)
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        const size_t before = pos_;
        body_of_module('\0');
        if (pos_ == before) fail("unexpected text after the module");
      }
    }
    if (!entry_ && public_.size() == 1) entry_ = public_[0];
    if (!entry_ && public_.size() > 1) test_functions();
    if (!entry_) fail_at(0, "no function @main (or a single public function) to run");
    for (const auto& [fn, fc] : checks_)
      if (fn != *entry_) unsupported(fc.first, fmt::format("a check in @{}, which the program's entry @{} does not run", fn, *entry_));
    const uint32_t own = uint32_t(functions_[*entry_].size());
    for (auto c : checks_[*entry_].checks) {
      c.actual += own, c.expected += own;
      m_.checks.push_back(c);
    }
    for (auto& c : m_.computations)
      if (c.name == *entry_) c.entry = true;
    m_.name = module_name_.empty() ? "stablehlo" : module_name_;
    if (!meshes_.empty())  // the first mesh, as XLA writes it in HLO text
      m_.attributes.emplace_back("frontend_attributes", fmt::format("{{xla.sdy.meshes={{mesh = #sdy.mesh{}}}}}", meshes_[0].second));
    return std::move(m_);
  }

 private:
  // ---- characters ----
  char peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }
  bool starts_with(std::string_view w) const { return s_.substr(pos_, w.size()) == w; }
  void ws() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '/' && peek(1) == '/') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  bool accept(char c) {
    ws();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  bool accept(std::string_view w) {
    ws();
    if (!starts_with(w)) return false;
    pos_ += w.size();
    return true;
  }
  void expect(char c) {
    if (!accept(c)) fail(fmt::format("expected '{}', found {}", c, found()));
  }
  void expect(std::string_view w) {
    if (!accept(w)) fail(fmt::format("expected '{}', found {}", w, found()));
  }
  static bool ident_char(char c) { return std::isalnum(uint8_t(c)) || c == '_' || c == '.' || c == '$' || c == '-'; }
  // A keyword: the word and no identifier character after it.
  bool keyword(std::string_view w) {
    ws();
    const char next = pos_ + w.size() < s_.size() ? s_[pos_ + w.size()] : ' ';
    if (!starts_with(w) || std::isalnum(uint8_t(next)) || next == '_' || next == '.') return false;
    pos_ += w.size();
    return true;
  }
  std::string word() {
    ws();
    const size_t b = pos_;
    while (pos_ < s_.size() && (std::isalnum(uint8_t(s_[pos_])) || s_[pos_] == '_' || s_[pos_] == '.' || s_[pos_] == '$')) ++pos_;
    if (b == pos_) fail(fmt::format("expected a name, found {}", found()));
    return std::string(s_.substr(b, pos_ - b));
  }
  std::string value_name() {  // %name or %name#k
    ws();
    if (peek() != '%') fail(fmt::format("expected a value (%name), found {}", found()));
    const size_t b = pos_++;
    while (pos_ < s_.size() && ident_char(s_[pos_]) && s_[pos_] != '-') ++pos_;
    if (peek() == '#') {
      ++pos_;
      while (std::isdigit(uint8_t(peek()))) ++pos_;
    }
    if (pos_ - b < 2) fail("empty value name");
    return std::string(s_.substr(b, pos_ - b));
  }
  std::string symbol() {
    ws();
    if (peek() != '@') fail(fmt::format("expected a symbol (@name), found {}", found()));
    ++pos_;
    if (peek() == '"') return string_lit();
    const size_t b = pos_;
    while (pos_ < s_.size() && (ident_char(s_[pos_]) && s_[pos_] != '-')) ++pos_;
    return std::string(s_.substr(b, pos_ - b));
  }
  std::string string_lit() {
    ws();
    if (peek() != '"') fail(fmt::format("expected a string, found {}", found()));
    const size_t start = pos_;
    std::string out;
    for (++pos_; pos_ < s_.size() && s_[pos_] != '"'; ++pos_) {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) {
        ++pos_;
        if (std::isxdigit(uint8_t(s_[pos_])) && pos_ + 1 < s_.size() && std::isxdigit(uint8_t(s_[pos_ + 1]))) {
          out += char(std::stoi(std::string(s_.substr(pos_, 2)), nullptr, 16));
          ++pos_;
          continue;
        }
      }
      out += s_[pos_];
    }
    if (pos_ >= s_.size()) fail_at(start, "unterminated string");
    ++pos_;
    return out;
  }
  // Skips a balanced (), [], {} or <> group starting at pos_ ("->" inside
  // does not close a '<').
  std::string_view balanced() {
    ws();
    const size_t b = pos_;
    std::string stack;
    do {
      if (pos_ >= s_.size()) fail("unbalanced brackets");
      const char c = s_[pos_];
      if (c == '"') {
        string_lit();
        continue;
      }
      if (c == '(' || c == '[' || c == '{' || c == '<') {
        if (stack.size() >= size_t(kMaxDepth) * 4) fail("brackets nest too deep");
        stack += c;
      } else if (c == ')' || c == ']' || c == '}' || (c == '>' && !(pos_ > 0 && s_[pos_ - 1] == '-'))) {
        static const std::map<char, char> open = {{')', '('}, {']', '['}, {'}', '{'}, {'>', '<'}};
        if (stack.empty() || stack.back() != open.at(c)) fail(fmt::format("unbalanced '{}'", c));
        stack.pop_back();
      }
      ++pos_;
    } while (!stack.empty());
    return s_.substr(b, pos_ - b);
  }

  std::string found() const {
    if (pos_ >= s_.size()) return "the end of the file";
    size_t e = pos_;
    while (e < s_.size() && e - pos_ < 20 && s_[e] != '\n') ++e;
    return fmt::format("'{}'", s_.substr(pos_, e - pos_));
  }
  std::pair<int, int> line_col(size_t at) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
    const size_t ls = it == line_starts_.begin() ? 0 : *(it - 1);
    return {int(it - line_starts_.begin()) + 1, int(at - ls) + 1};
  }
  [[noreturn]] void fail_at(size_t at, const std::string& msg) const {
    const auto [l, c] = line_col(at);
    throw Error(fmt::format("{}:{}:{}: {}", file_, l, c, msg));
  }
  [[noreturn]] void fail(const std::string& msg) const { fail_at(pos_, msg); }
  [[noreturn]] void unsupported(const Op& op, const std::string& what) const {
    throw Error(fmt::format("{}:{}:{}: unsupported {}{}", file_, op.line, op.col, what, op.source.empty() ? "" : " (" + op.source + ")"));
  }
  [[noreturn]] void malformed(const Op& op, const std::string& what) const {
    throw Error(fmt::format("{}:{}:{}: {}: {}", file_, op.line, op.col, op.name, what));
  }

  // ---- locations ----
  // #locN = loc(...) lines may follow their uses: read them all first.
  void scan_loc_aliases() {
    size_t p = 0;
    while (p < s_.size()) {
      size_t e = s_.find('\n', p);
      if (e == std::string_view::npos) e = s_.size();
      std::string_view line = s_.substr(p, e - p);
      if (line.size() > 1 && line[0] == '#' && line.substr(0, 4) == "#loc") {
        const size_t eq = line.find('=');
        if (eq != std::string_view::npos) {
          std::string name(line.substr(0, eq));
          while (!name.empty() && name.back() == ' ') name.pop_back();
          loc_aliases_[name] = std::string(line.substr(eq + 1));
        }
      }
      p = e + 1;
    }
  }
  // The user's "file:line" from the text of a location: the innermost frame
  // of a call site, the first known part of a fused location.
  std::string resolve_loc(std::string_view t, int depth = 0) const {
    auto trim = [](std::string_view v) {
      while (!v.empty() && (v.front() == ' ' || v.front() == '\n')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\n' || v.back() == '\r')) v.remove_suffix(1);
      return v;
    };
    t = trim(t);
    if (depth > kMaxDepth || t.empty()) return "";
    if (t.substr(0, 4) == "loc(" && t.back() == ')') return resolve_loc(t.substr(4, t.size() - 5), depth + 1);
    if (t[0] == '#') {
      auto it = loc_aliases_.find(std::string(t));
      return it == loc_aliases_.end() ? "" : resolve_loc(it->second, depth + 1);
    }
    if (t.substr(0, 9) == "callsite(" && t.back() == ')') {
      std::string_view in = t.substr(9, t.size() - 10);
      // split at the top-level " at "
      int d = 0;
      bool str = false;
      for (size_t i = 0; i + 4 <= in.size(); ++i) {
        const char c = in[i];
        if (c == '"') str = !str;
        if (str) continue;
        if (c == '(' || c == '[' || c == '<') ++d;
        if (c == ')' || c == ']' || c == '>') --d;
        if (d == 0 && in.substr(i, 4) == " at ") {
          std::string s = resolve_loc(in.substr(0, i), depth + 1);
          return s.empty() ? resolve_loc(in.substr(i + 4), depth + 1) : s;
        }
      }
      return "";
    }
    if (t.substr(0, 5) == "fused") {
      const size_t b = t.find('['), e = t.rfind(']');
      if (b == std::string_view::npos || e == std::string_view::npos || e < b) return "";
      std::string_view in = t.substr(b + 1, e - b - 1);
      int d = 0;
      bool str = false;
      size_t start = 0;
      for (size_t i = 0; i <= in.size(); ++i) {
        const char c = i < in.size() ? in[i] : ',';
        if (c == '"') str = !str;
        if (str) continue;
        if (c == '(' || c == '[' || c == '<') ++d;
        if (c == ')' || c == ']' || c == '>') --d;
        if (d == 0 && c == ',') {
          std::string s = resolve_loc(in.substr(start, i - start), depth + 1);
          if (!s.empty()) return s;
          start = i + 1;
        }
      }
      return "";
    }
    if (t[0] == '"') {
      const size_t q = t.find('"', 1);
      if (q == std::string_view::npos) return "";
      std::string_view rest = trim(t.substr(q + 1));
      if (!rest.empty() && rest[0] == '(' && rest.back() == ')') return resolve_loc(rest.substr(1, rest.size() - 2), depth + 1);  // a name
      if (!rest.empty() && rest[0] == ':') {  // "file":line:col
        size_t e = 1;
        while (e < rest.size() && std::isdigit(uint8_t(rest[e]))) ++e;
        if (e > 1) return fmt::format("{}:{}", t.substr(1, q - 1), rest.substr(1, e - 1));
      }
    }
    return "";
  }
  // An optional loc(...) after an op, a block argument or a function.
  std::string opt_loc() {
    ws();
    if (!starts_with("loc(")) return "";
    pos_ += 3;
    const std::string_view inside = balanced();
    return resolve_loc(inside.substr(1, inside.size() - 2));
  }

  // ---- types ----
  Shape type() {
    ws();
    Shape sh;
    if (accept("tensor<")) {
      for (;;) {
        ws();
        if (peek() == '?') fail("unsupported dynamic dimension (tpuc needs static shapes)");
        if (!std::isdigit(uint8_t(peek()))) break;
        const size_t b = pos_;
        while (std::isdigit(uint8_t(peek()))) ++pos_;
        if (pos_ - b > 15 || std::stoll(std::string(s_.substr(b, pos_ - b))) > int64_t(isa::kMaxDim)) fail("dimension above 2^48");
        if (sh.dims.size() == 64) fail("a tensor of rank above 64");
        sh.dims.push_back(std::stoll(std::string(s_.substr(b, pos_ - b))));
        if (peek() != 'x') fail(fmt::format("expected 'x' in a tensor type, found {}", found()));
        ++pos_;
      }
      sh.dtype = element_type();
      if (accept(',')) balanced_until('>');
      expect('>');
      return sh;
    }
    if (accept("tuple<")) {
      sh.tuple = true;
      if (!accept('>')) {
        if (++depth_ > kMaxDepth) fail("types nest deeper than 64");
        do sh.elements.push_back(type());
        while (accept(','));
        --depth_;
        expect('>');
      }
      return sh;
    }
    if (accept("!stablehlo.token")) {
      sh.dtype = "token";
      return sh;
    }
    sh.dtype = element_type();  // a scalar type written alone
    return sh;
  }
  std::string element_type() {
    ws();
    if (starts_with("complex<")) {
      pos_ += 7;
      balanced();
      return "complex";
    }
    return dtype_of(word());
  }
  void balanced_until(char stop) {
    while (pos_ < s_.size() && peek() != stop) {
      if (peek() == '<' || peek() == '(' || peek() == '[' || peek() == '{') balanced();
      else ++pos_;
    }
  }
  std::vector<Shape> type_list_in_parens() {
    std::vector<Shape> v;
    expect('(');
    if (accept(')')) return v;
    do {
      v.push_back(type());
      ws();
      if (peek() == '{') dict();  // result attributes
    } while (accept(','));
    expect(')');
    return v;
  }
  // ": (operand types) -> result types" or ": T1, T2" -> result types.
  std::vector<Shape> signature(bool list_is_results) {
    ws();
    if (peek() == '(') {
      type_list_in_parens();
      expect("->");
      ws();
      if (peek() == '(') return type_list_in_parens();
      return {type()};
    }
    std::vector<Shape> v;
    do v.push_back(type());
    while (accept(','));
    if (accept("->")) {  // chlo's "T -> T"
      ws();
      if (peek() == '(') return type_list_in_parens();
      return {type()};
    }
    if (list_is_results) return v;
    return {v.back()};
  }
  void skip_type_signature() {
    ws();
    if (peek() == '(') {
      balanced();
      expect("->");
      ws();
      if (peek() == '(') balanced();
      else type();
    } else {
      type();
    }
  }

  // ---- attributes ----
  Attr value(bool typed) {
    ws();
    if (++depth_ > kMaxDepth) fail("attributes nest deeper than 64");
    Attr a;
    const char c = peek();
    if (c == '[') {
      a.kind = Attr::list;
      ++pos_;
      if (!accept(']')) {
        do a.items.push_back(value(typed));
        while (accept(','));
        expect(']');
      }
    } else if (c == '{') {
      a = dict();
    } else if (c == '"') {
      a.kind = Attr::string, a.text = string_lit();
    } else if (c == '@') {
      a.kind = Attr::symbol, a.text = symbol();
    } else if (c == '#' || starts_with("array<") || starts_with("dense<") || starts_with("dense_resource<") || c == '<') {
      if (starts_with("dense_resource<")) fail("unsupported dense_resource literal (print the module with large constants inline)");
      if (c == '#') {
        ++pos_;
        a.name = "#" + word();
      } else if (c != '<') {
        a.name = word();
      }
      ws();
      if (peek() == '<') {
        const std::string_view g = balanced();
        a.text = std::string(g.substr(1, g.size() - 2));
      }
      a.kind = a.name == "dense" ? Attr::dense : Attr::dialect;
      if (a.name == "array") {
        a.kind = Attr::list;
        const size_t colon = a.text.find(':');
        std::string_view rest = colon == std::string::npos ? std::string_view() : std::string_view(a.text).substr(colon + 1);
        for (size_t p = 0; p < rest.size();) {
          size_t e = rest.find(',', p);
          if (e == std::string_view::npos) e = rest.size();
          std::string_view item = rest.substr(p, e - p);
          while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
          while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
          if (!item.empty()) a.items.push_back(Attr::leaf(Attr::number, std::string(item)));
          p = e + 1;
        }
      } else if (a.kind == Attr::dialect) {
        parse_dialect_fields(a);
      }
      if (a.kind == Attr::dense && typed && accept(':')) a.type = type();
    } else if (c == '(') {  // a function type: (T, ...) -> T | (T, ...)
      const size_t b = pos_;
      balanced();
      expect("->");
      ws();
      if (peek() == '(') balanced();
      else type();
      a.kind = Attr::word, a.text = std::string(s_.substr(b, pos_ - b));
    } else if (starts_with("tensor<") || starts_with("tuple<")) {
      const size_t b = pos_;
      type();
      a.kind = Attr::word, a.text = std::string(s_.substr(b, pos_ - b));
    } else if (c == '-' || c == '+' || std::isdigit(uint8_t(c))) {
      const size_t b = pos_++;
      while (pos_ < s_.size() && (std::isalnum(uint8_t(s_[pos_])) || s_[pos_] == '.' ||
                                  ((s_[pos_] == '-' || s_[pos_] == '+') && (s_[pos_ - 1] == 'e' || s_[pos_ - 1] == 'E'))))
        ++pos_;
      a.kind = Attr::number, a.text = std::string(s_.substr(b, pos_ - b));
    } else {
      a.kind = Attr::word, a.text = word();
    }
    if (typed && a.kind != Attr::dense) {
      const size_t save = pos_;
      ws();
      if (peek() == ':' && peek(1) != ':') {  // "1 : i64", "0.5 : f32"
        ++pos_;
        ws();
        if (std::isalpha(uint8_t(peek())) || peek() == '!') type();
        else pos_ = save;
      } else {
        pos_ = save;
      }
    }
    --depth_;
    return a;
  }
  // The inside of a dialect attribute: "key = value, ..." when it has that
  // form (#stablehlo.dot<...>, #stablehlo.gather<...>), words otherwise.
  void parse_dialect_fields(Attr& a) {
    if (a.text.find('=') == std::string::npos || a.name == "#stablehlo.conv") return;
    Parser sub(a.text, file_);
    sub.loc_aliases_ = loc_aliases_;
    sub.depth_ = depth_;
    try {
      for (;;) {
        sub.ws();
        if (sub.pos_ >= sub.s_.size()) break;
        const std::string k = sub.word();
        if (sub.accept('=')) a.fields.emplace_back(k, sub.value(true));
        else a.fields.emplace_back(k, Attr::leaf(Attr::word, "true"));
        if (!sub.accept(',')) break;
      }
    } catch (const Error&) {
      a.fields.clear();  // not of that form: the text is kept
    }
  }
  Attr dict() {
    expect('{');
    return dict_rest();
  }
  Attr dict_rest() {
    Attr a;
    a.kind = Attr::dict;
    if (accept('}')) return a;
    do {
      ws();
      std::string k = peek() == '"' ? string_lit() : word();
      if (accept('=')) a.fields.emplace_back(k, value(true));
      else a.fields.emplace_back(k, Attr::leaf(Attr::word, "unit"));
    } while (accept(','));
    expect('}');
    return a;
  }
  // ---- module and functions ----
  void body_of_module(char close) {
    for (;;) {
      ws();
      if (pos_ >= s_.size() || (close && peek() == close)) return;
      if (!close && (starts_with("module") || starts_with("\"builtin.module\""))) return;  // the next part's module
      if (peek() == '#') {  // #loc aliases (read up front) and other aliases
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (keyword("func.func") || keyword("func")) {
        pretty_function();
      } else if (starts_with("\"func.func\"")) {
        generic_function();
      } else if (keyword("sdy.mesh")) {
        const std::string name = symbol();
        expect('=');
        ws();
        const size_t b = pos_;
        value(true);
        meshes_.emplace_back(name, std::string(s_.substr(b, pos_ - b)));  // <["i"=4]>
        ws();
        if (peek() == '{') dict();
      } else {
        fail(fmt::format("unsupported top-level operation {}", found()));
      }
    }
  }

  // StableHLO's interpreter tests: several public functions of no
  // parameters, each with its own checks and no @main. The entry calls
  // each in turn and returns what they return (their checks' values
  // included), so every check runs.
  void test_functions() {
    for (const auto& f : public_)
      for (const auto& c : m_.computations)
        if (c.name == f)
          for (const auto& i : c.instructions)
            if (i.opcode == "parameter") return;  // not that form: no entry
    hlo::Computation main;
    main.name = "main";
    std::vector<Shape> results;
    FunctionChecks all;
    for (const auto& f : public_) {
      const FunctionChecks& fc = checks_[f];
      std::vector<Shape> shapes = functions_[f];
      const uint32_t base = uint32_t(results.size() + shapes.size());
      for (const auto& [a, b] : fc.values) shapes.push_back(a.shape), shapes.push_back(b.shape);
      for (isa::Check c : fc.checks) {
        c.actual += base, c.expected += base;
        all.checks.push_back(c);
      }
      Instruction call;
      call.opcode = "call", call.name = "%call/" + f, call.shape = tuple_of(shapes);
      call.attributes.emplace_back("to_apply", f);
      for (const auto& c : m_.computations)
        if (c.name == f) call.line = c.line;
      main.instructions.push_back(call);
      for (size_t k = 0; k < shapes.size(); ++k) {
        Instruction g = call;
        g.opcode = "get-tuple-element", g.name = fmt::format("%call/{}#{}", f, k), g.shape = shapes[k], g.operands = {call.name};
        g.attributes = {{"index", std::to_string(k)}};
        main.instructions.push_back(g);
        results.push_back(shapes[k]);
      }
    }
    Instruction root;
    root.opcode = "tuple", root.name = "%return/main", root.shape = tuple_of(results), root.root = true;
    for (const auto& i : main.instructions)
      if (i.opcode == "get-tuple-element") root.operands.push_back(i.name);
    main.instructions.push_back(root);
    m_.computations.push_back(std::move(main));
    checks_.clear();
    checks_["main"] = std::move(all);  // their indices are the entry's results
    functions_["main"] = {};
    entry_ = "main";
  }

  void add_function_result_info(const std::string& name, std::vector<Shape> results, bool is_public) {
    functions_[name] = std::move(results);
    if (name == "main") entry_ = name;
    else if (is_public && !entry_) public_.push_back(name);
  }

  void pretty_function() {
    ws();
    bool is_public = true;
    if (keyword("public")) is_public = true;
    else if (keyword("private") || keyword("nested")) is_public = false;
    const size_t at = pos_;
    const std::string name = symbol();
    auto scope = std::make_unique<Scope>();
    scope->comp.name = name;
    scope->comp.line = line_col(at).first;
    expect('(');
    int n = 0;
    if (!accept(')')) {
      do {
        const size_t aat = pos_;
        const std::string v = value_name();
        expect(':');
        Shape t = type();
        ws();
        Attr attrs;
        if (peek() == '{') attrs = dict();
        opt_loc();
        add_parameter(*scope, v, t, n++, aat);
        // A jax.jit in_sharding, as XLA's HLO text carries it.
        if (const Attr* sh = attrs.field("sdy.sharding"); sh && sh->kind == Attr::dialect)
          scope->comp.instructions.back().attributes.emplace_back("frontend_attributes",
                                                                 fmt::format("{{xla.sdy.sharding=\"{}<{}>\"}}", sh->name, sh->text));
      } while (accept(','));
      expect(')');
    }
    std::vector<Shape> results;
    if (accept("->")) {
      ws();
      if (peek() == '(') results = type_list_in_parens();
      else results = {type()};
    }
    if (keyword("attributes")) dict();
    add_function_result_info(name, results, is_public);
    current_function_ = name;
    expect('{');
    block(*scope, '}');
    expect('}');
    opt_loc();
    m_.computations.push_back(std::move(scope->comp));
  }

  void generic_function() {
    const size_t at = pos_;
    string_lit();
    expect('(');
    expect(')');
    std::string name;
    bool is_public = true;
    if (accept('<')) {
      Attr props = dict();
      expect('>');
      if (const Attr* sn = props.field("sym_name")) name = sn->text;
      if (const Attr* vis = props.field("sym_visibility")) is_public = vis->text == "public";
    }
    if (name.empty()) fail_at(at, "func.func without sym_name");
    // The result types are those of the return.
    auto scope = std::make_unique<Scope>();
    scope->comp.name = name;
    scope->comp.line = line_col(at).first;
    expect('(');
    expect('{');
    ws();
    if (peek() == '^') block_header(*scope, false);
    current_function_ = name;
    add_function_result_info(name, {}, is_public);  // the results are known at the return
    block(*scope, '}');
    expect('}');
    expect(')');
    ws();
    if (peek() == '{') dict();
    expect(':');
    skip_type_signature();
    opt_loc();
    functions_[name] = last_return_types_;
    m_.computations.push_back(std::move(scope->comp));
  }

  // ^bb0(%a: T, %b: T): parameters numbered in order, or in the order given.
  void block_header(Scope& sc, bool tuple_param, const std::vector<int>& order = {}) {
    expect('^');
    word();
    std::vector<std::pair<std::string, Shape>> args;
    std::vector<size_t> ats;
    if (accept('(')) {
      if (!accept(')')) {
        do {
          ats.push_back(pos_);
          const std::string v = value_name();
          expect(':');
          Shape t = type();
          opt_loc();
          args.emplace_back(v, t);
        } while (accept(','));
        expect(')');
      }
    }
    expect(':');
    bind_block_args(sc, args, tuple_param, order, ats.empty() ? pos_ : ats[0]);
  }
  void bind_block_args(Scope& sc, const std::vector<std::pair<std::string, Shape>>& args, bool tuple_param, const std::vector<int>& order,
                       size_t at) {
    if (tuple_param) {
      Shape tup;
      tup.tuple = true;
      for (const auto& a : args) tup.elements.push_back(a.second);
      Instruction p = make("parameter", tup, at);
      p.name = sc.tuple_param = "%param/" + sc.comp.name;
      p.literal = "0";
      sc.comp.instructions.push_back(p);
      for (size_t k = 0; k < args.size(); ++k) {
        Instruction g = make("get-tuple-element", args[k].second, at);
        g.name = args[k].first;
        g.operands = {sc.tuple_param};
        g.attributes.emplace_back("index", std::to_string(k));
        sc.comp.instructions.push_back(g);
        sc.values[args[k].first] = Value{g.name, g.shape};
      }
      sc.capture_base = args.size();
      return;
    }
    for (size_t k = 0; k < args.size(); ++k) add_parameter(sc, args[k].first, args[k].second, order.empty() ? int(k) : order[k], at);
  }
  void add_parameter(Scope& sc, const std::string& v, const Shape& t, int n, size_t at) {
    Instruction p = make("parameter", t, at);
    p.name = v;
    p.literal = std::to_string(n);
    sc.comp.instructions.push_back(p);
    sc.values[v] = Value{v, t};
  }

  // Ops up to the closing brace; the return (func.return, stablehlo.return,
  // sdy.return) sets the root.
  void block(Scope& sc, char close) {
    if (++depth_ > kMaxDepth) fail("regions nest deeper than 64");
    bool returned = false;
    for (;;) {
      ws();
      if (peek() == close || pos_ >= s_.size()) break;
      if (returned) fail("operations after the return of a block");
      returned = operation(sc);
    }
    if (!returned) fail("a block without a return");
    --depth_;
  }

  // Reads one op; returns true for a return.
  bool operation(Scope& sc) {
    Op op;
    const size_t at = pos_;
    std::tie(op.line, op.col) = line_col(at);
    ws();
    if (peek() == '%') {
      do {
        std::string r = value_name();
        int count = 1;
        if (peek() == ':') {
          ++pos_;
          const size_t b = pos_;
          while (std::isdigit(uint8_t(peek()))) ++pos_;
          if (b == pos_ || pos_ - b > 6) fail("bad result count");
          count = std::stoi(std::string(s_.substr(b, pos_ - b)));
        }
        op.results.emplace_back(r, count);
      } while (accept(','));
      expect('=');
    }
    ws();
    if (peek() == '"') {
      op.name = string_lit();
      generic_op(sc, op);
    } else {
      op.name = word();
      if (op.name == "return" || op.name == "func.return" || op.name == "stablehlo.return" || op.name == "sdy.return" ||
          op.name == "mhlo.return") {
        pretty_return(sc, op);
        return true;
      }
      if (op.name == "sdy.manual_computation") {
        manual_computation(sc, op);
        return false;
      }
      pretty_op(sc, op);
    }
    op.source = opt_loc();
    if (op.name == "func.return" || op.name == "stablehlo.return" || op.name == "sdy.return" || op.name == "mhlo.return") {
      set_return(sc, op, op.operands);
      return true;
    }
    try {
      emit(sc, op);
    } catch (const std::out_of_range&) {
      malformed(op, "an operand, a region or an attribute's value is missing");
    }
    return false;
  }

  // sdy.manual_computation(%x, ...) in_shardings=[...] out_shardings=[...]
  // manual_axes={...} (%a: local, ...) { body; sdy.return ... } : (global,
  // ...) -> global: written as XLA writes it in HLO text, which the importer
  // reads (docs/compiler.md): a GlobalToLocalShape custom call, a call of the
  // body (its own computation; nothing from outside it is visible), and a
  // LocalToGlobalShape custom call.
  void manual_computation(Scope& sc, Op& op) {
    if (meshes_.empty()) unsupported(op, "sdy.manual_computation without an sdy.mesh");
    expect('(');
    std::vector<Value> in;
    if (!accept(')')) {
      do in.push_back(lookup(sc, value_name(), op));
      while (accept(','));
      expect(')');
    }
    std::string in_sh, out_sh;
    for (;;) {
      ws();
      if (keyword("in_shardings")) expect('='), in_sh = balanced('[', ']');
      else if (keyword("out_shardings")) expect('='), out_sh = balanced('[', ']');
      else if (keyword("manual_axes")) expect('='), balanced('{', '}');
      else break;
    }
    auto body = std::make_unique<Scope>();
    body->comp.name = fmt::format("xla.sdy.manual_computation_body.{}", ++region_counter_);
    body->comp.line = op.line;
    std::vector<Shape> locals;
    expect('(');
    if (!accept(')')) {
      do {
        const size_t aat = pos_;
        const std::string v = value_name();
        expect(':');
        locals.push_back(type());
        opt_loc();
        add_parameter(*body, v, locals.back(), int(locals.size()) - 1, aat);
      } while (accept(','));
      expect(')');
    }
    if (locals.size() != in.size()) malformed(op, fmt::format("takes {} operands, its body {}", in.size(), locals.size()));
    expect('{');
    block(*body, '}');
    expect('}');
    const std::vector<Shape> local_results = last_return_types_;
    expect(':');
    type_list_in_parens();
    expect("->");
    ws();
    const std::vector<Shape> globals = peek() == '(' ? type_list_in_parens() : std::vector<Shape>{type()};
    op.source = opt_loc();
    if (globals.size() != local_results.size() || size_t(op.nresults()) != globals.size())
      malformed(op, "results do not match its body's");
    m_.computations.push_back(std::move(body->comp));
    auto shardings = [](const char* key, const std::string& list) {
      std::string t;  // the attribute's value, quoted
      for (char c : list) t += c == '"' ? std::string("\\\"") : std::string(1, c);
      return fmt::format("{{{}=\"#sdy.sharding_per_value<{}>\"}}", key, t);
    };
    Instruction g = make("custom-call", tuple_of(locals), 0, op);
    g.name = fresh(sc, op, "global_to_local");
    for (const auto& v : in) g.operands.push_back(v.name);
    g.attributes.emplace_back("custom_call_target", "\"xla.sdy.GlobalToLocalShape\"");
    g.attributes.emplace_back("frontend_attributes", shardings("xla.sdy.in_shardings", in_sh));
    const std::vector<Value> args = unpack(sc, op, g);
    Instruction c = make("call", tuple_of(local_results), 0, op);
    c.name = fresh(sc, op, "manual");
    for (const auto& v : args) c.operands.push_back(v.name);
    c.attributes.emplace_back("to_apply", m_.computations.back().name);
    const std::vector<Value> res = unpack(sc, op, c);
    Instruction o = make("custom-call", tuple_of(globals), 0, op);
    o.name = fresh(sc, op, "local_to_global");
    for (const auto& v : res) o.operands.push_back(v.name);
    o.attributes.emplace_back("custom_call_target", "\"xla.sdy.LocalToGlobalShape\"");
    o.attributes.emplace_back("frontend_attributes", shardings("xla.sdy.out_shardings", out_sh));
    define(sc, op, unpack(sc, op, o));
  }
  // The text of a bracketed attribute from `open` to its matching `close`.
  std::string balanced(char open, char close) {
    ws();
    const size_t b = pos_;
    if (peek() != open) fail(fmt::format("expected '{}', found {}", open, found()));
    int depth = 0;
    for (; pos_ < s_.size(); ++pos_) {
      const char ch = s_[pos_];
      if (ch == '"') {
        string_lit();
        --pos_;
      } else if (ch == open) {
        ++depth;
      } else if (ch == close && --depth == 0) {
        ++pos_;
        return std::string(s_.substr(b, pos_ - b));
      }
    }
    fail(fmt::format("'{}' without its '{}'", open, close));
  }

  void pretty_return(Scope& sc, Op& op) {
    std::vector<std::string> vals;
    ws();
    if (peek() == '%') {
      do vals.push_back(value_name());
      while (accept(','));
    }
    if (accept(':')) {  // the values' types, known already
      do type();
      while (accept(','));
    }
    op.source = opt_loc();
    set_return(sc, op, vals);
  }

  void set_return(Scope& sc, const Op& op, const std::vector<std::string>& vals) {
    std::vector<Value> vs;
    for (const auto& v : vals) vs.push_back(lookup(sc, v, op));
    last_return_types_.clear();
    for (const auto& v : vs) last_return_types_.push_back(v.shape);
    // A function's checks compare values it returns after its own.
    const auto checked = sc.parent == nullptr ? checks_.find(sc.comp.name) : checks_.end();
    const bool is_main = sc.parent == nullptr && (sc.comp.name == "main" || checked != checks_.end());
    if (checked != checks_.end())
      for (const auto& [a, b] : checked->second.values) vs.push_back(a), vs.push_back(b);
    // One value defined here becomes the root itself (combiner regions must
    // be exactly "params, op"); otherwise a tuple.
    if (vs.size() == 1 && !is_main && sc.capture != Scope::Capture::tuple) {
      for (auto& inst : sc.comp.instructions)
        if (inst.name == vs[0].name && !inst.root) {
          inst.root = true;
          return;
        }
    }
    Instruction t = make("tuple", {}, 0, op);
    t.name = fmt::format("%return/{}", sc.comp.name);
    t.shape.tuple = true;
    for (const auto& v : vs) t.operands.push_back(v.name), t.shape.elements.push_back(v.shape);
    t.root = true;
    sc.comp.instructions.push_back(t);
  }

  // "name"(operands) [<{properties}>] [(regions)] [{attributes}] : signature
  void generic_op(Scope& sc, Op& op) {
    expect('(');
    if (!accept(')')) {
      do op.operands.push_back(value_name());
      while (accept(','));
      expect(')');
    }
    if (accept('[')) fail("unsupported successor blocks");
    ws();
    if (starts_with("<{")) {
      ++pos_;
      Attr props = dict();
      expect('>');
      for (auto& f : props.fields) op.attrs.push_back(std::move(f));
    }
    ws();
    if (peek() == '(') {
      ++pos_;
      size_t k = 0;
      do {
        expect('{');
        op.regions.push_back(region(sc, op, k++));
        expect('}');
      } while (accept(','));
      expect(')');
    }
    attr_dict(op);
    expect(':');
    op.result_types = signature(true);
    if (const Attr* ct = op.attr("call_target_name")) op.callee = ct->text;
    if (const Attr* c = op.attr("callee")) op.callee = c->text;
    if (const Attr* d = op.attr("decomposition")) op.callee = d->text;
  }

  // An optional {attributes} after an op's operands, merged into its attributes.
  void attr_dict(Op& op) {
    ws();
    if (peek() != '{') return;
    Attr d = dict();
    for (auto& f : d.fields) op.attrs.push_back(std::move(f));
  }

  // The region's kind follows from the op and the region's position.
  enum class RegionKind { scalar, while_state, branch };
  RegionKind region_kind(const Op& op) const {
    if (op.name == "stablehlo.while") return RegionKind::while_state;
    if (op.name == "stablehlo.if" || op.name == "stablehlo.case") return RegionKind::branch;
    return RegionKind::scalar;
  }

  // A region in braces (the '{' already read): a block with an optional
  // header. Returns the computation's name.
  std::string region(Scope& parent, const Op& op, size_t k, const std::vector<std::pair<std::string, Shape>>* pretty_args = nullptr,
                     const std::vector<int>& order = {}) {
    auto sc = std::make_unique<Scope>();
    sc->parent = &parent;
    sc->comp.name = fmt::format("{}/region{}", parent.comp.name, ++region_counter_);
    sc->comp.line = op.line;
    const RegionKind kind = region_kind(op);
    sc->capture = kind == RegionKind::scalar ? Scope::Capture::scalar_params : Scope::Capture::tuple;
    if (kind == RegionKind::while_state && k == 1) {
      if (while_scopes_.empty()) malformed(op, "a do region without its cond");
      sc->captures = while_scopes_.back()->captures;  // cond and body share one state tuple
    } else {
      sc->captures = std::make_shared<std::vector<Scope::Captured>>();
    }
    ws();
    if (pretty_args) bind_block_args(*sc, *pretty_args, kind != RegionKind::scalar, order, pos_);
    else if (peek() == '^') block_header(*sc, kind != RegionKind::scalar, order);
    else if (kind != RegionKind::scalar) bind_block_args(*sc, {}, true, {}, pos_);
    block(*sc, '}');
    finish_region(*sc, kind, op);
    const std::string name = sc->comp.name;
    if (kind == RegionKind::while_state) while_scopes_.push_back(std::move(sc));
    else {
      if (kind == RegionKind::branch) branch_captures_.push_back(*sc->captures);
      m_.computations.push_back(std::move(sc->comp));
    }
    return name;
  }
  void finish_region(Scope& sc, RegionKind kind, const Op& op) {
    if (kind == RegionKind::scalar) {
      if (!sc.captures->empty())
        unsupported(op, fmt::format("{} whose region uses {} from outside it", op.name, sc.captures->front().outer));
      return;
    }
    // The tuple parameter's shape gains the captured values (patched again
    // for while, whose two regions share them).
    patch_tuple_param(sc);
  }
  void patch_tuple_param(Scope& sc) {
    for (auto& inst : sc.comp.instructions)
      if (inst.name == sc.tuple_param) {
        inst.shape.elements.resize(sc.capture_base);
        for (const auto& c : *sc.captures) inst.shape.elements.push_back(c.parent_value.shape);
      }
  }

  // ---- values ----
  Value lookup(Scope& sc, const std::string& name, const Op& op) {
    auto it = sc.values.find(name);
    if (it != sc.values.end()) return it->second;
    if (auto c = sc.captured_here.find(name); c != sc.captured_here.end()) return sc.values.at(c->second);
    if (!sc.parent) malformed(op, fmt::format("{} is not defined before its use", name));
    const Value outer = lookup(*sc.parent, name, op);
    auto& caps = *sc.captures;
    size_t k = 0;
    while (k < caps.size() && caps[k].outer != name) ++k;
    if (k == caps.size()) caps.push_back({name, outer});
    if (sc.capture == Scope::Capture::scalar_params) return outer;  // reported by finish_region
    Instruction g = make("get-tuple-element", outer.shape, 0, op);
    g.name = fmt::format("{}/captured", name);
    g.operands = {sc.tuple_param};
    g.attributes.emplace_back("index", std::to_string(sc.capture_base + k));
    sc.comp.instructions.push_back(g);
    sc.values[g.name] = Value{g.name, g.shape};
    sc.captured_here[name] = g.name;
    return sc.values[g.name];
  }

  // ---- pretty forms ----
  void pretty_op(Scope& sc, Op& op) {
    const std::string& n = op.name;
    static const char* special[] = {"call", "func.call", "stablehlo.custom_call", "stablehlo.composite", "stablehlo.constant",
                                    "stablehlo.reduce", "stablehlo.while", "sdy.sharding_constraint", "sdy.reshard",
                                    "chlo.is_inf", "chlo.is_pos_inf", "chlo.is_neg_inf", "chlo.tan", "chlo.sinh", "chlo.cosh",
                                    "chlo.atan", "chlo.asin", "chlo.acos", "chlo.asinh", "chlo.acosh", "chlo.atanh",
                                    "chlo.erfc", "chlo.lgamma", "chlo.next_after", "chlo.bessel_i1e", "chlo.erf_inv",
                                    "chlo.top_k"};
    bool known = n.rfind("check.", 0) == 0;
    for (const char* k : special) known |= n == k;
    if (!known) hlo_opcode(n, op);  // unsupported ops stop here, before their syntax
    if (n == "stablehlo.constant") {
      op.attrs.emplace_back("value", value(false));
      expect(':');
      op.result_types = signature(false);
      return;
    }
    if (n == "stablehlo.reduce") return pretty_reduce(sc, op);
    if (n == "stablehlo.while") return pretty_while(sc, op);
    if (n == "stablehlo.convolution") {
      expect('(');
      do op.operands.push_back(value_name());
      while (accept(','));
      expect(')');
    }
    if (n == "chlo.top_k") {  // chlo.top_k(%x, k = 3)
      expect('(');
      op.operands.push_back(value_name());
      expect(',');
      ws();
      if (word() != "k") fail("chlo.top_k needs k = N");
      expect('=');
      op.attrs.emplace_back("k", value(false));
      expect(')');
    }
    if (n == "call" || n == "func.call" || n == "stablehlo.custom_call") {
      op.callee = symbol();
      expect('(');
      if (!accept(')')) {
        do op.operands.push_back(value_name());
        while (accept(','));
        expect(')');
      }
    }
    if (n == "stablehlo.composite") op.attrs.emplace_back("name", Attr::leaf(Attr::string, string_lit()));
    for (;;) {
      ws();
      const char c = peek();
      if (c == ':' || c == '\0') break;
      if (c == '%') {
        op.operands.push_back(value_name());
      } else if (c == ',') {
        ++pos_;
      } else if (c == '[' && n == "stablehlo.slice") {
        pretty_slice(op);
      } else if (c == '[' && n == "stablehlo.get_tuple_element") {
        ++pos_;
        op.attrs.emplace_back("index", value(false));
        expect(']');
      } else if (c == '{') {
        attr_dict(op);
      } else if (c == '<' && (n == "sdy.sharding_constraint" || n == "sdy.reshard")) {  // <@mesh, [{"x"}, {}]>
        const size_t b = pos_;
        balanced();
        op.attrs.emplace_back("sharding", Attr::leaf(Attr::dialect, std::string(s_.substr(b, pos_ - b)), "#sdy.sharding"));
      } else if (std::isalpha(uint8_t(c))) {
        const size_t save = pos_;
        const std::string k = word();
        if (accept('=')) {
          pretty_keyword(op, k);
        } else {
          pos_ = save;
          op.attrs.emplace_back("", value(false));  // GT, FLOAT, ...
        }
      } else {
        fail(fmt::format("unexpected {} in {}", found(), n));
      }
    }
    expect(':');
    op.result_types = signature(n == "stablehlo.optimization_barrier");
    if (const Attr* d = op.attr("decomposition")) op.callee = d->text;
  }

  // key = value in a pretty form, under the generic attribute's name.
  void pretty_keyword(Op& op, const std::string& k) {
    const std::string& n = op.name;
    auto pair_of_lists = [&](const char* a, const char* b) {
      op.attrs.emplace_back(a, value(false));
      expect('x');
      op.attrs.emplace_back(b, value(false));
    };
    if (k == "contracting_dims") return pair_of_lists("lhs_contracting_dimensions", "rhs_contracting_dimensions");
    if (k == "batching_dims") return pair_of_lists("lhs_batching_dimensions", "rhs_batching_dimensions");
    if (k == "dim_numbers") {
      const size_t b = pos_;
      ws();
      balanced();
      expect('x');
      balanced();
      expect("->");
      balanced();
      op.attrs.emplace_back("dimension_numbers", Attr::leaf(Attr::dialect, std::string(s_.substr(b, pos_ - b)), "#stablehlo.conv"));
      return;
    }
    if (k == "window") {
      Attr w = dict();
      for (auto& [wk, wv] : w.fields) {
        if (wk == "stride") op.attrs.emplace_back("window_strides", wv);
        else if (wk == "pad") op.attrs.emplace_back("padding", wv);
        else if (wk == "lhs_dilate") op.attrs.emplace_back("lhs_dilation", wv);
        else if (wk == "rhs_dilate") op.attrs.emplace_back("rhs_dilation", wv);
        else if (wk == "reverse") op.attrs.emplace_back("window_reversal", wv);
        else fail(fmt::format("unsupported window attribute {}", wk));
      }
      return;
    }
    if (k == "algorithm") fail("unsupported dot algorithm (tpuc takes the precision config)");
    if (k == "format" && n == "stablehlo.reduce_precision") {  // format = e5m10
      const std::string f = word();
      const size_t m = f.find('m');
      if (f.size() < 4 || f[0] != 'e' || m == std::string::npos || f.find_first_not_of("0123456789", 1) != m ||
          m + 1 == f.size() || f.find_first_not_of("0123456789", m + 1) != std::string::npos)
        fail(fmt::format("reduce_precision format {} is not eNmM", f));
      op.attrs.emplace_back("exponent_bits", Attr::leaf(Attr::number, f.substr(1, m - 1)));
      op.attrs.emplace_back("mantissa_bits", Attr::leaf(Attr::number, f.substr(m + 1)));
      return;
    }
    static const std::map<std::string, std::map<std::string, std::string>> names = {
        {"dims",
         {{"stablehlo.broadcast_in_dim", "broadcast_dimensions"},
          {"stablehlo.transpose", "permutation"},
          {"stablehlo.reverse", "dimensions"},
          {"stablehlo.reduce", "dimensions"}}},
        {"dim", {{"stablehlo.concatenate", "dimension"}, {"stablehlo.iota", "iota_dimension"}}},
        {"low", {{"stablehlo.pad", "edge_padding_low"}}},
        {"high", {{"stablehlo.pad", "edge_padding_high"}}},
        {"interior", {{"stablehlo.pad", "interior_padding"}}},
        {"sizes", {{"stablehlo.dynamic_slice", "slice_sizes"}}},
        {"precision", {{"stablehlo.dot_general", "precision_config"}, {"stablehlo.dot", "precision_config"}}},
    };
    std::string key = k;
    if (auto it = names.find(k); it != names.end()) {
      auto jt = it->second.find(n);
      if (jt != it->second.end()) key = jt->second;
    }
    op.attrs.emplace_back(key, value(false));
  }

  // [0:2, 1:5:2]
  void pretty_slice(Op& op) {
    expect('[');
    Attr start = Attr::leaf(Attr::list, ""), limit = start, stride = start;
    if (!accept(']')) {
      do {
        auto num = [&] { return value(false); };
        start.items.push_back(num());
        expect(':');
        limit.items.push_back(num());
        if (accept(':')) stride.items.push_back(num());
        else stride.items.push_back(Attr::leaf(Attr::number, "1"));
      } while (accept(','));
      expect(']');
    }
    op.attrs.emplace_back("start_indices", start);
    op.attrs.emplace_back("limit_indices", limit);
    op.attrs.emplace_back("strides", stride);
  }

  // stablehlo.reduce(%x init: %c)[, (%y init: %d)] applies OP across
  //   dimensions = [..] : sig   |   ... across dimensions = [..] : sig
  //   reducer(%a: T, %b: T) (%c: T, %d: T) { region }
  void pretty_reduce(Scope& sc, Op& op) {
    std::vector<std::string> xs, inits;
    do {
      expect('(');
      xs.push_back(value_name());
      expect("init:");
      inits.push_back(value_name());
      expect(')');
    } while (accept(','));
    op.operands = xs;
    op.operands.insert(op.operands.end(), inits.begin(), inits.end());
    std::string applies;
    if (keyword("applies")) applies = word();
    if (!keyword("across")) fail(fmt::format("expected 'across' in stablehlo.reduce, found {}", found()));
    expect("dimensions");
    expect('=');
    op.attrs.emplace_back("dimensions", value(false));
    attr_dict(op);
    expect(':');
    op.result_types = signature(true);
    if (!applies.empty()) {
      if (xs.size() != 1) fail("'applies' needs a reduce of one operand");
      op.regions.push_back(combiner_region(sc, op, applies, lookup(sc, inits[0], op).shape.dtype));
      return;
    }
    if (!keyword("reducer")) fail(fmt::format("expected 'applies' or 'reducer' in stablehlo.reduce, found {}", found()));
    std::vector<std::pair<std::string, Shape>> args;
    std::vector<int> order;
    const int n = int(xs.size());
    for (int k = 0; k < n; ++k) {
      expect('(');
      for (int j = 0; j < 2; ++j) {
        if (j) expect(',');
        const std::string v = value_name();
        expect(':');
        args.emplace_back(v, type());
        opt_loc();
        order.push_back(j * n + k);
      }
      expect(')');
    }
    expect('{');
    op.regions.push_back(region(sc, op, 0, &args, order));
    expect('}');
  }

  // A computation of two scalars and one op, for "applies OP".
  std::string combiner_region(Scope& sc, const Op& op, const std::string& fn, const std::string& dtype) {
    Computation c;
    c.name = fmt::format("{}/region{}", sc.comp.name, ++region_counter_);
    c.line = op.line;
    Shape s;
    s.dtype = dtype;
    for (int k = 0; k < 2; ++k) {
      Instruction p = make("parameter", s, 0, op);
      p.name = fmt::format("%p{}", k);
      p.literal = std::to_string(k);
      c.instructions.push_back(p);
    }
    Instruction r = make(hlo_opcode(fn, op), s, 0, op);
    r.name = "%r";
    r.operands = {"%p0", "%p1"};
    r.root = true;
    c.instructions.push_back(r);
    m_.computations.push_back(std::move(c));
    return m_.computations.back().name;
  }

  // %r:2 = stablehlo.while(%iterArg = %a, %iterArg_0 = %b) : T1, T2
  //   cond { ... } do { ... }
  void pretty_while(Scope& sc, Op& op) {
    std::vector<std::pair<std::string, Shape>> args;
    std::vector<std::string> names;
    expect('(');
    if (!accept(')')) {
      do {
        names.push_back(value_name());
        expect('=');
        op.operands.push_back(value_name());
      } while (accept(','));
      expect(')');
    }
    if (accept(':')) {
      do args.emplace_back("", type());
      while (accept(','));
    }
    attr_dict(op);
    if (args.size() != names.size()) fail("stablehlo.while needs one type per value");
    for (size_t k = 0; k < names.size(); ++k) args[k].first = names[k], op.result_types.push_back(args[k].second);
    if (!keyword("cond")) fail(fmt::format("expected 'cond' in stablehlo.while, found {}", found()));
    expect('{');
    op.regions.push_back(region(sc, op, 0, &args));
    expect('}');
    if (!keyword("do")) fail(fmt::format("expected 'do' in stablehlo.while, found {}", found()));
    expect('{');
    op.regions.push_back(region(sc, op, 1, &args));
    expect('}');
  }

  // ---- writing HLO ----
  Instruction make(const std::string& opcode, const Shape& shape, size_t at, const Op& op = Op()) {
    Instruction i;
    i.opcode = opcode;
    i.shape = shape;
    if (op.line) i.line = op.line, i.col = op.col, i.source = op.source;
    else std::tie(i.line, i.col) = line_col(at);
    return i;
  }
  std::string fresh(Scope& sc, const Op& op, const char* what) {
    return fmt::format("{}/{}{}", op.results.empty() ? "%" : op.results[0].first, what, ++sc.counter);
  }

  // Elements of a shape, saturating (the importer refuses large ones).
  static int64_t elements(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s.dims)
      if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
    return n;
  }

  static std::string ints_text(const std::vector<int64_t>& v) {
    std::string s = "{";
    for (size_t k = 0; k < v.size(); ++k) s += (k ? "," : "") + std::to_string(v[k]);
    return s + "}";
  }
  std::vector<int64_t> ints(const Op& op, const Attr& a) const {
    std::vector<int64_t> v;
    std::function<void(const Attr&)> walk = [&](const Attr& x) {
      if (x.kind == Attr::list) {
        for (const auto& y : x.items) walk(y);
      } else if (x.kind == Attr::number) {
        try {
          size_t used = 0;
          v.push_back(std::stoll(x.text, &used, 0));
          if (used != x.text.size()) throw 0;
        } catch (...) {
          malformed(op, fmt::format("'{}' is not an integer", x.text));
        }
      } else if (x.kind == Attr::dense) {
        const auto toks = dense_tokens(op, x.text);
        for (const auto& t : toks) {
          try {
            v.push_back(std::stoll(t, nullptr, 0));
          } catch (...) {
            malformed(op, fmt::format("'{}' is not an integer", t));
          }
        }
        const int64_t n = x.type ? elements(*x.type) : 1;
        if (toks.size() == 1 && n > 1 && n < (int64_t(1) << 20)) v.assign(size_t(n), v[0]);  // a splat
      } else {
        malformed(op, fmt::format("expected integers, found '{}'", x.text));
      }
    };
    walk(a);
    return v;
  }
  std::vector<int64_t> ints(const Op& op, const char* key, bool required = true) const {
    const Attr* a = op.attr(key);
    if (!a) {
      if (required) malformed(op, fmt::format("missing {}", key));
      return {};
    }
    return ints(op, *a);
  }
  std::vector<int64_t> field_ints(const Op& op, const Attr& a, const char* key) const {
    const Attr* f = a.field(key);
    return f ? ints(op, *f) : std::vector<int64_t>{};
  }
  std::vector<std::string> dense_tokens(const Op& op, const std::string& t) const {
    std::vector<std::string> out;
    std::string cur;
    for (char c : t) {
      if (c == '[' || c == ']' || c == ',' || c == ' ' || c == '\n') {
        if (!cur.empty()) out.push_back(cur), cur.clear();
      } else if (c == '(') {
        malformed(op, "unsupported complex literal");
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
  }

  // "name", or unsupported.
  std::string hlo_opcode(const std::string& name, const Op& op) const {
    static const std::map<std::string, std::string> renamed = {
        {"stablehlo.broadcast_in_dim", "broadcast"}, {"stablehlo.dot_general", "dot"}, {"stablehlo.dot", "dot"},
        {"stablehlo.optimization_barrier", "opt-barrier"}, {"chlo.erf", "erf"}, {"chlo.top_k", "topk"}, {"stablehlo.exponential_minus_one", "exponential-minus-one"}};
    if (auto it = renamed.find(name); it != renamed.end()) return it->second;
    static const char* same[] = {"add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "and", "or", "xor", "not",
                                 "negate", "abs", "exponential", "log", "tanh", "logistic", "rsqrt", "sqrt", "floor", "ceil",
                                 "round_nearest_even", "round_nearest_afz", "sign", "shift_left", "shift_right_arithmetic",
                                 "shift_right_logical", "select", "clamp", "convert", "reshape", "bitcast_convert", "remainder", "atan2", "popcnt", "reduce_precision", "triangular_solve",
                                 "sine", "cosine", "log_plus_one", "is_finite", "transpose", "reverse", "concatenate", "slice",
                                 "pad", "iota", "compare", "convolution", "reduce", "reduce_window", "select_and_scatter", "gather",
                                 "scatter", "sort", "dynamic_slice", "dynamic_update_slice", "tuple", "get_tuple_element", "constant", "all_reduce",
                                 "all_gather", "reduce_scatter", "all_to_all", "collective_permute"};
    for (const char* s : same)
      if (name == std::string("stablehlo.") + s) {
        std::string h = s;
        for (char& c : h)
          if (c == '_') c = '-';
        return h;
      }
    // StableHLO's names: HLO's with underscores, those renamed above, and
    // its own.
    std::vector<std::string> known = {"stablehlo.case", "stablehlo.if", "stablehlo.return", "stablehlo.composite",
                                      "stablehlo.create_token", "stablehlo.dynamic_broadcast_in_dim", "stablehlo.dynamic_iota",
                                      "stablehlo.dynamic_pad", "stablehlo.dynamic_gather", "stablehlo.dynamic_conv",
                                      "stablehlo.real_dynamic_slice", "stablehlo.einsum", "stablehlo.unary_einsum",
                                      "stablehlo.torch_index_select", "stablehlo.uniform_quantize", "stablehlo.uniform_dequantize",
                                      "stablehlo.cross_replica_sum"};
    for (const auto& r : renamed) known.push_back(r.first);
    for (std::string h : xla_opcodes()) {
      for (char& c : h)
        if (c == '-') c = '_';
      known.push_back("stablehlo." + h);
    }
    if (name.rfind("stablehlo.", 0) == 0 && std::find(known.begin(), known.end(), name) == known.end())
      throw Error(fmt::format("{}:{}:{}: unknown operation {}{}{}", file_, op.line, op.col, name, did_you_mean(name, known),
                              op.source.empty() ? "" : " (" + op.source + ")"));
    unsupported(op, fmt::format("operation {}", name));
  }

  // Binds the op's results (%r, or %r#k for %r:N) to the values computed.
  void define(Scope& sc, const Op& op, const std::vector<Value>& vals) {
    if (size_t(op.nresults()) != vals.size()) malformed(op, fmt::format("defines {} results, computes {}", op.nresults(), vals.size()));
    size_t k = 0;
    for (const auto& [r, count] : op.results)
      for (int j = 0; j < count; ++j) sc.values[count == 1 ? r : fmt::format("{}#{}", r, j)] = vals[k++];
  }

  Value push(Scope& sc, Instruction i) {
    sc.comp.instructions.push_back(std::move(i));
    const auto& b = sc.comp.instructions.back();
    return Value{b.name, b.shape};
  }

  // One instruction of a tuple shape, then one get-tuple-element per value.
  std::vector<Value> unpack(Scope& sc, const Op& op, Instruction i) {
    const Value t = push(sc, std::move(i));
    std::vector<Value> out;
    for (size_t k = 0; k < t.shape.elements.size(); ++k) {
      Instruction g = make("get-tuple-element", t.shape.elements[k], 0, op);
      g.name = fresh(sc, op, "gte");
      g.operands = {t.name};
      g.attributes.emplace_back("index", std::to_string(k));
      out.push_back(push(sc, g));
    }
    return out;
  }

  Shape tuple_of(const std::vector<Shape>& v) const {
    Shape t;
    t.tuple = true;
    t.elements = v;
    return t;
  }
  const Shape& one_result(const Op& op) const {
    if (op.result_types.size() != 1) malformed(op, fmt::format("expected one result type, found {}", op.result_types.size()));
    return op.result_types[0];
  }

  void emit(Scope& sc, Op& op) {
    std::vector<Value> in;
    for (const auto& o : op.operands) in.push_back(lookup(sc, o, op));
    const std::string& n = op.name;
    // Attributes tpuc reads nowhere but that change nothing it computes.
    static const char* ignored[] = {"indices_are_sorted", "unique_indices", "has_side_effect", "api_version", "backend_config",
                                    "mhlo.sharding", "mhlo.frontend_attributes", "result_layouts", "operand_layouts",
                                    "output_operand_aliases", "channel_handle", "use_global_device_ids", "compare_type",
                                    "composite_attributes", "version", "name", "is_stable", "mhlo.layout_mode", "sdy.sharding",
                                    "called_computations", "jax.result_info"};
    auto known = [&](const std::string& k, std::initializer_list<const char*> keys) {
      for (const char* i : ignored)
        if (k == i) return true;
      for (const char* i : keys)
        if (k == i) return true;
      return false;
    };
    auto check_attrs = [&](std::initializer_list<const char*> keys) {
      for (const auto& [k, v] : op.attrs)
        if (!k.empty() && !known(k, keys)) unsupported(op, fmt::format("attribute {} of {}", k, n));
    };

    if (n == "call" || n == "func.call" || n == "stablehlo.composite") {
      check_attrs({"callee", "decomposition"});
      if (op.callee.empty()) malformed(op, "calls no function");
      Instruction i = make("call", tuple_of(op.result_types), 0, op);
      i.name = fresh(sc, op, "call");
      for (const auto& v : in) i.operands.push_back(v.name);
      i.attributes.emplace_back("to_apply", op.callee);
      return define(sc, op, unpack(sc, op, i));
    }
    if (n == "stablehlo.custom_call" || n.rfind("check.", 0) == 0) return custom_call(sc, op, in);
    if (n == "sdy.manual_computation") unsupported(op, "multi-device program: sdy.manual_computation here");
    if (n == "sdy.sharding_constraint" || n == "sdy.reshard") {
      // with_sharding_constraint: XLA's Sharding custom call (the identity on one device).
      check_attrs({"sharding"});
      Instruction i = make("custom-call", one_result(op), 0, op);
      i.name = fresh(sc, op, "sharding");
      i.operands = {in.at(0).name};
      i.attributes.emplace_back("custom_call_target", "\"Sharding\"");
      if (const Attr* sh = op.attr("sharding"))
        i.attributes.emplace_back("frontend_attributes", fmt::format("{{xla.sdy.sharding=\"#sdy.sharding_per_value<[{}]>\"}}", sh->text));
      return define(sc, op, {push(sc, std::move(i))});
    }
    if (n == "stablehlo.while") {
      // HLO's while carries one tuple: the operands, then the values the
      // regions capture, passed through unchanged by the body.
      if (while_scopes_.size() < 2) malformed(op, "while needs a cond and a do region");
      auto body = std::move(while_scopes_.back());
      while_scopes_.pop_back();
      auto cond = std::move(while_scopes_.back());
      while_scopes_.pop_back();
      const auto& caps = *cond->captures;
      for (const auto& c : caps)
        if (!body->captured_here.count(c.outer)) lookup(*body, c.outer, op);
      patch_tuple_param(*cond), patch_tuple_param(*body);
      auto& bi = body->comp.instructions;
      std::stable_partition(bi.begin(), bi.end(), [](const Instruction& x) { return !x.root; });  // the root last
      for (auto& inst : bi)
        if (inst.root) {
          for (const auto& c : caps) {
            inst.operands.push_back(body->captured_here.at(c.outer));
            inst.shape.elements.push_back(c.parent_value.shape);
          }
        }
      m_.computations.push_back(std::move(cond->comp));
      m_.computations.push_back(std::move(body->comp));
      std::vector<Shape> state;
      Instruction t = make("tuple", {}, 0, op);
      t.name = fresh(sc, op, "state");
      for (const auto& v : in) t.operands.push_back(v.name), state.push_back(v.shape);
      for (const auto& c : caps) t.operands.push_back(c.parent_value.name), state.push_back(c.parent_value.shape);
      t.shape = tuple_of(state);
      push(sc, t);
      check_attrs({});
      Instruction w = make("while", tuple_of(state), 0, op);
      w.name = fresh(sc, op, "while");
      w.operands = {t.name};
      w.attributes.emplace_back("condition", op.regions.at(0));
      w.attributes.emplace_back("body", op.regions.at(1));
      std::vector<Value> out = unpack(sc, op, w);
      out.resize(in.size());
      return define(sc, op, out);
    }
    if (n == "stablehlo.if" || n == "stablehlo.case") {
      check_attrs({});
      const size_t nb = op.regions.size();
      if (branch_captures_.size() < nb || in.size() != 1) malformed(op, "needs one selector and its regions");
      std::vector<std::vector<Scope::Captured>> caps(branch_captures_.end() - long(nb), branch_captures_.end());
      branch_captures_.resize(branch_captures_.size() - nb);
      Instruction c = make("conditional", tuple_of(op.result_types), 0, op);
      c.name = fresh(sc, op, "cond");
      c.operands.push_back(in[0].name);
      for (size_t b = 0; b < nb; ++b) {
        Instruction t = make("tuple", {}, 0, op);
        t.name = fresh(sc, op, "captures");
        std::vector<Shape> shapes;
        for (const auto& cap : caps[b]) t.operands.push_back(cap.parent_value.name), shapes.push_back(cap.parent_value.shape);
        t.shape = tuple_of(shapes);
        c.operands.push_back(push(sc, t).name);
      }
      std::string names = "{";
      for (size_t b = 0; b < nb; ++b) names += (b ? "," : "") + op.regions[b];
      if (n == "stablehlo.if") {
        if (nb != 2) malformed(op, "if needs two regions");
        c.attributes.emplace_back("true_computation", op.regions[0]);
        c.attributes.emplace_back("false_computation", op.regions[1]);
      } else {
        c.attributes.emplace_back("branch_computations", names + "}");
      }
      return define(sc, op, unpack(sc, op, c));
    }

    if (n == "chlo.top_k") {
      check_attrs({"k"});
      if (in.size() != 1 || op.result_types.size() != 2) malformed(op, "takes one operand and gives two results");
      Instruction t = make("topk", tuple_of(op.result_types), 0, op);
      t.name = fresh(sc, op, "topk");
      t.operands = {in[0].name};
      t.attributes.emplace_back("k", std::to_string(ints(op, "k").at(0)));
      t.attributes.emplace_back("largest", "true");
      return define(sc, op, unpack(sc, op, t));
    }
    if (n.rfind("chlo.", 0) == 0 && n != "chlo.erf") return define(sc, op, {chlo(sc, op, in)});
    Instruction i;
    const std::string opc = hlo_opcode(n, op);
    if (n == "stablehlo.optimization_barrier" || (n == "stablehlo.all_reduce" && op.result_types.size() > 1)) {
      check_attrs({"replica_groups"});
      i = make(opc, tuple_of(op.result_types), 0, op);
      i.name = fresh(sc, op, "t");
      for (const auto& v : in) i.operands.push_back(v.name);
      if (const Attr* g = op.attr("replica_groups")) i.attributes.emplace_back("replica_groups", replica_groups(op, *g));
      return define(sc, op, unpack(sc, op, i));
    }
    const bool multi = op.result_types.size() > 1;
    i = make(opc, multi ? tuple_of(op.result_types) : one_result(op), 0, op);
    i.name = op.results.size() == 1 && op.results[0].second == 1 ? op.results[0].first : fresh(sc, op, "v");
    for (const auto& v : in) i.operands.push_back(v.name);
    auto& at = i.attributes;
    const Shape& rt = i.shape;

    if (n == "stablehlo.constant") {
      check_attrs({"value"});
      const Attr* v = op.attr("value");
      if (!v || v->kind != Attr::dense) malformed(op, "constant needs a dense<...> value");
      return define(sc, op, {constant(sc, op, i, *v)});
    }
    if (n == "stablehlo.broadcast_in_dim") {
      check_attrs({"broadcast_dimensions"});
      const std::vector<int64_t> d = ints(op, "broadcast_dimensions");
      const Shape& xs = in.at(0).shape;
      if (d.size() != xs.dims.size()) malformed(op, "broadcast_dimensions must name every operand dimension");
      // HLO's broadcast keeps sizes: drop the size-1 dimensions that grow.
      std::vector<int64_t> kept_dims, kept_map;
      for (size_t k = 0; k < d.size(); ++k) {
        if (d[k] < 0 || size_t(d[k]) >= rt.dims.size()) malformed(op, "broadcast dimension out of range");
        if (xs.dims[k] == rt.dims[size_t(d[k])]) kept_dims.push_back(xs.dims[k]), kept_map.push_back(d[k]);
        else if (xs.dims[k] != 1) malformed(op, "broadcast of a dimension that is neither 1 nor the result's size");
      }
      if (elements(xs) == elements(rt) && kept_dims.size() == xs.dims.size()) {
        bool in_order = true;  // only size-1 dimensions added: a reshape, as XLA writes it
        for (size_t k = 1; k < kept_map.size(); ++k) in_order &= kept_map[k] > kept_map[k - 1];
        if (in_order) {
          i.opcode = "reshape";
          return define(sc, op, {push(sc, i)});
        }
      }
      if (kept_dims.size() != xs.dims.size()) {
        Instruction r = make("reshape", Shape{false, {}, xs.dtype, kept_dims, {}}, 0, op);
        r.name = fresh(sc, op, "reshape");
        r.operands = {in[0].name};
        i.operands = {push(sc, r).name};
      }
      at.emplace_back("dimensions", ints_text(kept_map));
    } else if (n == "stablehlo.transpose") {
      check_attrs({"permutation"});
      at.emplace_back("dimensions", ints_text(ints(op, "permutation")));
    } else if (n == "stablehlo.reverse") {
      check_attrs({"dimensions"});
      at.emplace_back("dimensions", ints_text(ints(op, "dimensions")));
    } else if (n == "stablehlo.concatenate") {
      check_attrs({"dimension"});
      at.emplace_back("dimensions", ints_text(ints(op, "dimension")));
    } else if (n == "stablehlo.triangular_solve") {
      check_attrs({"left_side", "lower", "unit_diagonal", "transpose_a"});
      for (const char* k : {"left_side", "lower", "unit_diagonal"}) {
        const Attr* a = op.attr(k);
        if (!a || (a->text != "true" && a->text != "false")) malformed(op, fmt::format("triangular_solve needs {} = true or false", k));
        at.emplace_back(k, a->text);
      }
      const Attr* t = op.attr("transpose_a");
      std::string how = t ? last_word(t->text) : "";
      if (!how.empty() && how.back() == '>') how.pop_back();
      if (how != "NO_TRANSPOSE" && how != "TRANSPOSE" && how != "ADJOINT") malformed(op, "triangular_solve needs transpose_a");
      at.emplace_back("transpose_a", how);
    } else if (n == "stablehlo.reduce_precision") {
      check_attrs({"exponent_bits", "mantissa_bits"});
      at.emplace_back("exponent_bits", std::to_string(ints(op, "exponent_bits").at(0)));
      at.emplace_back("mantissa_bits", std::to_string(ints(op, "mantissa_bits").at(0)));
    } else if (n == "stablehlo.iota") {
      check_attrs({"iota_dimension"});
      at.emplace_back("iota_dimension", std::to_string(ints(op, "iota_dimension").at(0)));
    } else if (n == "stablehlo.slice") {
      check_attrs({"start_indices", "limit_indices", "strides"});
      const auto b = ints(op, "start_indices"), e = ints(op, "limit_indices");
      auto st = ints(op, "strides", false);
      if (st.empty()) st.assign(b.size(), 1);
      if (e.size() != b.size() || st.size() != b.size()) malformed(op, "slice bounds differ in rank");
      std::string s = "{";
      for (size_t k = 0; k < b.size(); ++k) s += fmt::format("{}[{}:{}:{}]", k ? "," : "", b[k], e[k], st[k]);
      at.emplace_back("slice", s + "}");
    } else if (n == "stablehlo.pad") {
      check_attrs({"edge_padding_low", "edge_padding_high", "interior_padding"});
      const auto lo = ints(op, "edge_padding_low"), hi = ints(op, "edge_padding_high"), mid = ints(op, "interior_padding");
      if (hi.size() != lo.size() || mid.size() != lo.size()) malformed(op, "padding differs in rank");
      std::string s;
      for (size_t k = 0; k < lo.size(); ++k) s += fmt::format("{}{}_{}_{}", k ? "x" : "", lo[k], hi[k], mid[k]);
      at.emplace_back("padding", s);
    } else if (n == "stablehlo.compare") {
      check_attrs({"comparison_direction"});
      std::string dir;
      for (const auto& [k, v] : op.attrs) {
        const std::string w = v.kind == Attr::dialect ? last_word(v.text) : v.text;
        if (k == "comparison_direction" || (k.empty() && (w == "EQ" || w == "NE" || w == "LT" || w == "LE" || w == "GT" || w == "GE")))
          dir = w;
        else if ((k == "compare_type" || k.empty()) && w != "FLOAT" && w != "SIGNED" && w != "UNSIGNED" && w != "TOTALORDER" && w != "NOTYPE")
          unsupported(op, fmt::format("compare type {}", w));
        else if (w == "UNSIGNED" || w == "TOTALORDER")
          at.emplace_back("type", w);
      }
      if (dir.empty()) malformed(op, "compare needs a direction");
      at.emplace_back("direction", dir);
    } else if (n == "stablehlo.dot_general" || n == "stablehlo.dot") {
      check_attrs({"dot_dimension_numbers", "precision_config", "lhs_contracting_dimensions", "rhs_contracting_dimensions",
                   "lhs_batching_dimensions", "rhs_batching_dimensions"});
      std::vector<int64_t> lb, rb, lc, rc;
      if (n == "stablehlo.dot") {
        lc = {int64_t(in.at(0).shape.dims.size()) - 1}, rc = {0};
      } else if (const Attr* d = op.attr("dot_dimension_numbers")) {
        lb = field_ints(op, *d, "lhs_batching_dimensions"), rb = field_ints(op, *d, "rhs_batching_dimensions");
        lc = field_ints(op, *d, "lhs_contracting_dimensions"), rc = field_ints(op, *d, "rhs_contracting_dimensions");
      } else {
        lb = ints(op, "lhs_batching_dimensions", false), rb = ints(op, "rhs_batching_dimensions", false);
        lc = ints(op, "lhs_contracting_dimensions", false), rc = ints(op, "rhs_contracting_dimensions", false);
      }
      if (!lb.empty()) at.emplace_back("lhs_batch_dims", ints_text(lb));
      if (!rb.empty()) at.emplace_back("rhs_batch_dims", ints_text(rb));
      at.emplace_back("lhs_contracting_dims", ints_text(lc));
      at.emplace_back("rhs_contracting_dims", ints_text(rc));
      precision(op, at);
    } else if (n == "stablehlo.convolution") {
      check_attrs({"dimension_numbers", "window_strides", "padding", "lhs_dilation", "rhs_dilation", "window_reversal",
                   "feature_group_count", "batch_group_count", "precision_config"});
      const Attr* dn = op.attr("dimension_numbers");
      if (!dn) malformed(op, "convolution needs dimension numbers");
      const auto [labels, kernel_spatial] = conv_labels(op, dn->text);
      const Shape& ks = in.at(1).shape;
      std::vector<int64_t> size;
      for (size_t d : kernel_spatial) size.push_back(ks.dims.at(d));
      window_attr(op, at, size, "window_strides", "lhs_dilation", "rhs_dilation", "window_reversal");
      at.emplace_back("dim_labels", labels);
      for (const char* k : {"feature_group_count", "batch_group_count"})
        if (op.attr(k)) at.emplace_back(k, std::to_string(ints(op, k).at(0)));
      precision(op, at);
    } else if (n == "stablehlo.reduce") {
      check_attrs({"dimensions"});
      at.emplace_back("dimensions", ints_text(ints(op, "dimensions")));
      at.emplace_back("to_apply", op.regions.at(0));
    } else if (n == "stablehlo.sort") {
      check_attrs({"dimension"});
      at.emplace_back("dimensions", ints_text(ints(op, "dimension")));
      if (op.regions.empty()) malformed(op, "sort needs a comparator region");
      at.emplace_back("to_apply", op.regions.at(0));
    } else if (n == "stablehlo.reduce_window") {
      check_attrs({"window_dimensions", "window_strides", "base_dilations", "window_dilations", "padding"});
      window_attr(op, at, ints(op, "window_dimensions"), "window_strides", "base_dilations", "window_dilations", nullptr);
      at.emplace_back("to_apply", op.regions.at(0));
    } else if (n == "stablehlo.select_and_scatter") {
      check_attrs({"window_dimensions", "window_strides", "padding"});
      window_attr(op, at, ints(op, "window_dimensions"), "window_strides", nullptr, nullptr, nullptr);
      at.emplace_back("select", op.regions.at(0));
      at.emplace_back("scatter", op.regions.at(1));
    } else if (n == "stablehlo.gather") {
      check_attrs({"dimension_numbers", "slice_sizes"});
      const Attr* d = op.attr("dimension_numbers");
      if (!d) malformed(op, "gather needs dimension_numbers");
      for (const char* k : {"offset_dims", "collapsed_slice_dims", "operand_batching_dims", "start_indices_batching_dims", "start_index_map"})
        at.emplace_back(k, ints_text(field_ints(op, *d, k)));
      const auto ivd = field_ints(op, *d, "index_vector_dim");  // printed only where it is not 0
      at.emplace_back("index_vector_dim", std::to_string(ivd.empty() ? 0 : ivd[0]));
      at.emplace_back("slice_sizes", ints_text(ints(op, "slice_sizes")));
    } else if (n == "stablehlo.scatter") {
      check_attrs({"scatter_dimension_numbers"});
      const Attr* d = op.attr("scatter_dimension_numbers");
      if (!d) malformed(op, "scatter needs scatter_dimension_numbers");
      for (const char* k : {"update_window_dims", "inserted_window_dims", "input_batching_dims", "scatter_indices_batching_dims",
                            "scatter_dims_to_operand_dims"})
        at.emplace_back(k, ints_text(field_ints(op, *d, k)));
      const auto ivd = field_ints(op, *d, "index_vector_dim");
      at.emplace_back("index_vector_dim", std::to_string(ivd.empty() ? int64_t(in.at(1).shape.dims.size()) : ivd[0]));
      at.emplace_back("to_apply", op.regions.at(0));
    } else if (n == "stablehlo.dynamic_slice") {
      check_attrs({"slice_sizes"});
      at.emplace_back("dynamic_slice_sizes", ints_text(ints(op, "slice_sizes")));
    } else if (n == "stablehlo.get_tuple_element") {
      check_attrs({"index"});
      at.emplace_back("index", std::to_string(ints(op, "index").at(0)));
    } else if (n == "stablehlo.all_reduce" || n == "stablehlo.all_gather" || n == "stablehlo.reduce_scatter" ||
               n == "stablehlo.all_to_all" || n == "stablehlo.collective_permute") {
      if (const Attr* g = op.attr("replica_groups")) at.emplace_back("replica_groups", replica_groups(op, *g));
      if (const Attr* g = op.attr("source_target_pairs")) at.emplace_back("source_target_pairs", replica_groups(op, *g));
      for (const char* k : {"all_gather_dim", "scatter_dimension"})
        if (op.attr(k)) at.emplace_back("dimensions", ints_text(ints(op, k)));
      if (op.attr("split_dimension")) {
        if (ints(op, "split_dimension") != ints(op, "concat_dimension"))
          unsupported(op, "all_to_all with split_dimension and concat_dimension apart (tpuc splits and joins along one)");
        at.emplace_back("dimensions", ints_text(ints(op, "split_dimension")));
      }
      if (!op.regions.empty()) at.emplace_back("to_apply", op.regions.at(0));
    } else {
      check_attrs({});
    }
    if (multi) return define(sc, op, unpack(sc, op, i));
    define(sc, op, {push(sc, i)});
  }

  // The HLO instructions an op is spelled with (chlo's, below): each named
  // after the op and located at it.
  Instruction spelled(Scope& sc, const Op& op, const std::string& opc, const std::vector<Value>& args, const Shape& shape) {
    Instruction i = make(opc, shape, 0, op);
    i.name = fresh(sc, op, "chlo");
    for (const auto& a : args) i.operands.push_back(a.name);
    return i;
  }
  // `literal` in every element of `like`, pushed.
  Value spelled_splat(Scope& sc, const Op& op, const char* literal, const Shape& like) {
    Shape scalar = like;
    scalar.dims.clear();
    Instruction c = spelled(sc, op, "constant", {}, scalar);
    c.literal = literal;
    Instruction b = spelled(sc, op, "broadcast", {push(sc, c)}, like);
    b.attributes.emplace_back("dimensions", "{}");
    return push(sc, b);
  }
  // compare(a, b) in direction `dir`, pushed: a pred of a's shape.
  Value spelled_compare(Scope& sc, const Op& op, const char* dir, const Value& a, const Value& b) {
    Shape ps = a.shape;
    ps.dtype = "pred";
    Instruction c = spelled(sc, op, "compare", {a, b}, ps);
    c.attributes.emplace_back("direction", dir);
    return push(sc, c);
  }

  // chlo ops JAX emits, spelled with HLO ops: is_inf (|x| == inf), is_pos_inf,
  // is_neg_inf, tan (sin / cos); and in f32 (bf16 and f16 converted, the
  // result rounded once), sinh, cosh, the inverse trigonometric and
  // hyperbolic functions and the special functions:
  //   atan x = atan2(x, 1), asin x = 2 atan2(x, 1 + s), acos x = 2 atan2(s, 1 + x)
  //   (pi at x = -1), with s = sqrt((1 - x)(1 + x)) (no cancellation near |x| = 1);
  //   asinh x = sign(x) log1p(|x| + x^2 / (1 + sqrt(x^2 + 1))), and log|x| + log 2
  //   from |x| = 2^64 (where x^2 overflows); acosh x = log1p(y + sqrt(y (x + 1))),
  //   y = x - 1, and log x + log 2 from 2^64; atanh x = (log1p(x) - log1p(-x)) / 2;
  //   erfc x = t exp(-x^2 + P(t)), t = 1 / (1 + |x| / 2) (Numerical Recipes'
  //   erfcc, 2nd ed. 6.2: a Chebyshev fit of relative error < 1.2e-7), 2 - erfc|x| below 0;
  //   lgamma by Lanczos' series (g = 7, 9 terms, as XLA) for z = x - 1, with
  //   (z + 1/2 - t / log t) log t for (z + 1/2) log t - t, t = z + 7.5, and below
  //   1/2 the reflection log pi - log sin(pi frac|x|) - lgamma(1 - x) (poles: inf);
  //   within 4e-6 of C's lgamma relative to max(1, |lgamma|) (numpy, x in [-20, 1e13]);
  //   bessel_i1e x = e^-|x| I1(x) by Chebyshev series fitted here (numpy's chebfit on
  //   2,000 nodes of I1's power series summed in f64): x g(|x| / 4 - 1) to |x| = 8 (g of
  //   degree 18, 3e-9 relative), sign(x) h(16 / |x| - 1) / sqrt|x| beyond (degree 7,
  //   1e-9); within 9 ULP of the series in f32 (Clenshaw's recurrence rounds);
  //   erf_inv x = x P(w), w = -log1p(-x^2), P one of Giles' two polynomials (w - 2.5
  //   below 5, sqrt(w) - 3 beyond; "Approximating the erfinv function", as XLA),
  //   +-inf at +-1; sinh and cosh as XLA, e^(x - log 2) -+ e^(-x - log 2) (finite
  //   where e^x alone overflows; within |x| 2^-24 relative), sinh below |x| = 1
  //   (expm1(x) - expm1(-x)) / 2 (no cancellation).
  // Each is within 3 ULP of numpy's f64 results rounded (erfc of f32 within 8:
  // P's f32 Horner steps).
  Value chlo(Scope& sc, const Op& op, const std::vector<Value>& in) {
    const std::string& n = op.name;
    if (n == "chlo.next_after") return next_after(sc, op, in);
    if (in.size() != 1 || op.result_types.size() != 1) malformed(op, "takes one operand and gives one result");
    const Value x = in[0];
    const Shape& rt = op.result_types[0];
    const bool in_f32 = n == "chlo.atan" || n == "chlo.asin" || n == "chlo.acos" || n == "chlo.asinh" || n == "chlo.acosh" ||
                        n == "chlo.atanh" || n == "chlo.erfc" || n == "chlo.lgamma" || n == "chlo.bessel_i1e" ||
                        n == "chlo.erf_inv" || n == "chlo.sinh" || n == "chlo.cosh";
    if (x.shape.dtype != "f32" && x.shape.dtype != "bf16" && !(in_f32 && x.shape.dtype == "f16"))
      unsupported(op, fmt::format("{} of {}", n, x.shape.dtype));
    auto inst = [&](const std::string& opc, std::vector<Value> args, const Shape& shape) { return spelled(sc, op, opc, args, shape); };
    auto splat = [&](const char* literal) { return spelled_splat(sc, op, literal, x.shape); };
    if (in_f32) {
      Shape fs = x.shape, ps = x.shape;
      fs.dtype = "f32", ps.dtype = "pred";
      const Value v = x.shape.dtype == "f32" ? x : push(sc, inst("convert", {x}, fs));
      auto k = [&](const char* literal) { return spelled_splat(sc, op, literal, fs); };
      auto un = [&](const char* opc, const Value& a) { return push(sc, inst(opc, {a}, fs)); };
      auto bin = [&](const char* opc, const Value& a, const Value& b) { return push(sc, inst(opc, {a, b}, fs)); };
      auto cmp = [&](const char* dir, const Value& a, const Value& b) { return spelled_compare(sc, op, dir, a, b); };
      auto select = [&](const Value& p, const Value& a, const Value& b) { return push(sc, inst("select", {p, a, b}, fs)); };
      const Value one = k("1");
      const auto s = [&] { return un("sqrt", bin("multiply", bin("subtract", one, v), bin("add", one, v))); };
      Value r;
      if (n == "chlo.atan") {
        r = bin("atan2", v, one);
      } else if (n == "chlo.asin") {
        r = bin("multiply", k("2"), bin("atan2", v, bin("add", one, s())));
      } else if (n == "chlo.acos") {
        r = select(cmp("NE", v, k("-1")), bin("multiply", k("2"), bin("atan2", s(), bin("add", one, v))), k("3.14159274"));
      } else if (n == "chlo.asinh") {
        const Value ax = un("abs", v), a2 = bin("multiply", ax, ax);
        const Value mid = un("log-plus-one", bin("add", ax, bin("divide", a2, bin("add", one, un("sqrt", bin("add", a2, one))))));
        const Value big = bin("add", un("log", ax), k("0.693147182"));
        r = bin("multiply", un("sign", v), select(cmp("GE", ax, k("1.8446744e19")), big, mid));
      } else if (n == "chlo.acosh") {
        const Value y = bin("subtract", v, one);
        const Value mid = un("log-plus-one", bin("add", y, un("sqrt", bin("multiply", y, bin("add", v, one)))));
        r = select(cmp("GE", v, k("1.8446744e19")), bin("add", un("log", v), k("0.693147182")), mid);
      } else if (n == "chlo.atanh") {
        r = bin("multiply", k("0.5"), bin("subtract", un("log-plus-one", v), un("log-plus-one", un("negate", v))));
      } else if (n == "chlo.lgamma") {
        const Value refl = cmp("LT", v, k("0.5"));
        const Value z = select(refl, un("negate", v), bin("subtract", v, one));
        Value sum = k("0.99999999999980993227684700473478");
        const char* coeffs[] = {"676.520368121885098567009190444019", "-1259.13921672240287047156078755283",
                                "771.3234287776530788486528258894",   "-176.61502916214059906584551354",
                                "12.507343278686904814458936853",     "-0.13857109526572011689554707",
                                "9.984369578019570859563e-6",         "1.50563273514931155834e-7"};
        for (int i = 0; i < 8; ++i) sum = bin("add", sum, bin("divide", k(coeffs[i]), bin("add", z, k(std::to_string(i + 1).c_str()))));
        const Value t = bin("add", z, k("7.5"));
        const Value logt = bin("add", k("2.0149030205422647"), un("log-plus-one", bin("divide", z, k("7.5"))));  // log 7.5 + log1p(z / 7.5)
        const Value logy = bin("add", bin("add", k("0.91893853320467274178"), bin("multiply", bin("subtract", bin("add", z, k("0.5")),
                                                                                                          bin("divide", t, logt)),
                                                                                              logt)),
                               un("log", sum));
        const Value ax = un("abs", v), fr0 = bin("subtract", ax, un("floor", ax));
        const Value fr = select(cmp("GT", fr0, k("0.5")), bin("subtract", one, fr0), fr0);
        const Value den = un("log", un("sine", bin("multiply", k("3.14159265358979"), fr)));
        Instruction fin = inst("is-finite", {den}, ps);
        const Value reflected = select(push(sc, fin), bin("subtract", bin("subtract", k("1.1447298858494002"), den), logy), un("negate", den));
        r = select(cmp("EQ", ax, k("inf")), k("inf"), select(refl, reflected, logy));
      } else if (n == "chlo.erf_inv") {
        const Value w = un("negate", un("log-plus-one", un("negate", bin("multiply", v, v))));
        const auto poly = [&](const Value& t, std::initializer_list<const char*> c) {
          Value p;
          bool first = true;
          for (const char* ck : c) p = first ? k(ck) : bin("add", bin("multiply", p, t), k(ck)), first = false;
          return p;
        };
        const Value pa = poly(bin("subtract", w, k("2.5")), {"2.81022636e-08", "3.43273939e-07", "-3.5233877e-06", "-4.39150654e-06",
                                                              "0.00021858087", "-0.00125372503", "-0.00417768164", "0.246640727",
                                                              "1.50140941"});
        const Value pb = poly(bin("subtract", un("sqrt", w), k("3")), {"-0.000200214257", "0.000100950558", "0.00134934322",
                                                                         "-0.00367342844", "0.00573950773", "-0.0076224613",
                                                                         "0.00943887047", "1.00167406", "2.83297682"});
        const Value y = bin("multiply", select(cmp("LT", w, k("5")), pa, pb), v);
        r = select(cmp("EQ", un("abs", v), one), bin("multiply", v, k("inf")), y);
      } else if (n == "chlo.sinh" || n == "chlo.cosh") {
        // As XLA (whose values StableHLO's testdata holds): e^(x - log 2) -+
        // e^(-x - log 2), finite where e^x alone overflows; x - log 2 rounds,
        // so up to |x| 2^-24 relative (48 ULP at 89).
        const char* op2 = n == "chlo.cosh" ? "add" : "subtract";
        const Value half = k("-0.693147182");  // log(1/2)
        r = bin(op2, un("exponential", bin("add", v, half)), un("exponential", bin("add", un("negate", v), half)));
        if (n == "chlo.sinh") {
          const Value small = bin("multiply", k("0.5"), bin("subtract", un("exponential-minus-one", v), un("exponential-minus-one", un("negate", v))));
          r = select(cmp("LT", un("abs", v), one), small, r);
        }
      } else if (n == "chlo.bessel_i1e") {
        const auto series = [&](const Value& t, std::initializer_list<const char*> c) {  // Clenshaw: sum c_k T_k(t)
          const std::vector<const char*> cs(c);
          const Value t2 = bin("multiply", k("2"), t);
          Value b1 = k("0"), b2 = k("0");
          for (size_t j = cs.size() - 1; j >= 1; --j) {
            const Value b0 = bin("add", bin("subtract", bin("multiply", t2, b1), b2), k(cs[j]));
            b2 = b1, b1 = b0;
          }
          return bin("add", bin("subtract", bin("multiply", t, b1), b2), k(cs[0]));
        };
        const Value ax = un("abs", v);
        const Value near = bin("multiply", v, series(bin("subtract", bin("multiply", ax, k("0.25")), one),
                                                   {"0.126293593", "-0.176416518", "0.102643659", "-0.0529459812", "0.024726449",
                                                    "-0.0105640849", "0.00415642294", "-0.00151357245", "0.000512285956",
                                                    "-0.000161760816", "4.78156511e-05", "-1.32731637e-05", "3.47025131e-06",
                                                    "-8.56872026e-07", "2.00329476e-07", "-4.44505909e-08", "9.38153775e-09",
                                                    "-1.88724946e-09", "3.62559307e-10"}));
        const Value far = bin("multiply", un("sign", v),
                              bin("divide", series(bin("subtract", bin("divide", k("16"), ax), one),
                                                   {"0.389288117", "-0.00976109747", "-0.00011058896", "-3.88254365e-06",
                                                    "-2.51244777e-07", "-2.62935335e-08", "-3.8565331e-09", "-5.37820434e-10"}),
                                  un("sqrt", ax)));
        r = select(cmp("LE", ax, k("8")), near, far);
      } else {  // erfc
        const Value z = un("abs", v), t = bin("divide", one, bin("add", one, bin("multiply", k("0.5"), z)));
        Value p = k("0.17087277");
        for (const char* c : {"-0.82215223", "1.48851587", "-1.13520398", "0.27886807", "-0.18628806", "0.09678418", "0.37409196",
                              "1.00002368", "-1.26551223"})
          p = bin("add", bin("multiply", p, t), k(c));
        // exp(-z^2 + p) as exp(-hi) exp(p - lo), z^2 = hi + lo exactly (Dekker's
        // product of 12-bit halves): -z^2 + p rounded would be off by up to
        // half an ULP of z^2, 16 ULP of the result at z = 7.
        const Value cz = bin("multiply", z, k("4097")), zh = bin("subtract", cz, bin("subtract", cz, z)), zl = bin("subtract", z, zh);
        const Value hi = bin("multiply", z, z);
        const Value lo = bin("add", bin("add", bin("subtract", bin("multiply", zh, zh), hi), bin("multiply", k("2"), bin("multiply", zh, zl))),
                             bin("multiply", zl, zl));
        const Value e = bin("multiply", bin("multiply", t, un("exponential", un("negate", hi))), un("exponential", bin("subtract", p, lo)));
        r = select(cmp("LT", v, k("0")), bin("subtract", k("2"), e), e);
      }
      return x.shape.dtype == "f32" ? r : push(sc, inst("convert", {r}, rt));
    }
    if (n == "chlo.is_inf" || n == "chlo.is_pos_inf" || n == "chlo.is_neg_inf") {
      const Value v = n == "chlo.is_inf" ? push(sc, inst("abs", {x}, x.shape)) : x;
      Instruction eq = inst("compare", {v, splat(n == "chlo.is_neg_inf" ? "-inf" : "inf")}, rt);
      eq.attributes.emplace_back("direction", "EQ");
      return push(sc, eq);
    }
    if (n == "chlo.tan") return push(sc, inst("divide", {push(sc, inst("sine", {x}, rt)), push(sc, inst("cosine", {x}, rt))}, rt));
    unsupported(op, fmt::format("operation {}", n));
  }

  // chlo.next_after(x, y): the float next to x toward y, on the f32 bits
  // (bf16 widened exactly, its ULP 2^16 of them): one step up where |x|
  // grows toward y, down where it shrinks; y where x == y; from 0 the
  // smallest subnormal with y's sign; NaN where either is NaN.
  Value next_after(Scope& sc, const Op& op, const std::vector<Value>& in) {
    if (in.size() != 2 || op.result_types.size() != 1) malformed(op, "takes two operands and gives one result");
    const Value x = in[0], y = in[1];
    const Shape& rt = op.result_types[0];
    if ((x.shape.dtype != "f32" && x.shape.dtype != "bf16") || y.shape.dtype != x.shape.dtype || y.shape.dims != x.shape.dims)
      unsupported(op, fmt::format("chlo.next_after of {} and {} (tpuc steps f32 and bf16)", x.shape.dtype, y.shape.dtype));
    Shape fs = x.shape, is = x.shape;
    fs.dtype = "f32", is.dtype = "s32";
    auto inst = [&](const std::string& opc, std::vector<Value> args, const Shape& shape) { return push(sc, spelled(sc, op, opc, args, shape)); };
    auto k = [&](const char* literal, const Shape& like) { return spelled_splat(sc, op, literal, like); };
    auto cmp = [&](const char* dir, const Value& a, const Value& b) { return spelled_compare(sc, op, dir, a, b); };
    const bool wide = x.shape.dtype == "f32";
    const Value xf = wide ? x : inst("convert", {x}, fs), yf = wide ? y : inst("convert", {y}, fs);
    const Value bits = inst("bitcast-convert", {xf}, is), step = k(wide ? "1" : "65536", is), zero = k("0", fs);
    const Value up = cmp("EQ", cmp("GT", yf, xf), cmp("GT", xf, zero));  // |x| grows toward y
    Value r = inst("bitcast-convert", {inst("select", {up, inst("add", {bits, step}, is), inst("subtract", {bits, step}, is)}, is)}, fs);
    const Value y_sign = inst("and", {inst("bitcast-convert", {yf}, is), k("-2147483648", is)}, is);
    const Value tiny = inst("bitcast-convert", {inst("or", {y_sign, step}, is)}, fs);
    r = inst("select", {cmp("EQ", xf, zero), tiny, r}, fs);
    r = inst("select", {cmp("EQ", xf, yf), yf, r}, fs);
    r = inst("select", {cmp("NE", xf, xf), xf, inst("select", {cmp("NE", yf, yf), yf, r}, fs)}, fs);
    return wide ? r : inst("convert", {r}, rt);
  }

  static std::string last_word(const std::string& t) {
    const size_t sp = t.find_last_of(' ');
    return sp == std::string::npos ? t : t.substr(sp + 1);
  }

  void precision(const Op& op, std::vector<std::pair<std::string, std::string>>& at) const {
    const Attr* p = op.attr("precision_config");
    if (!p) return;
    std::string s = "{";
    for (size_t k = 0; k < p->items.size(); ++k) {
      std::string w = last_word(p->items[k].text);
      for (char& c : w) c = char(std::tolower(uint8_t(c)));
      s += (k ? "," : "") + w;
    }
    at.emplace_back("operand_precision", s + "}");
  }

  // "window={size=.. stride=.. pad=lo_hi x .. lhs_dilate=.. rhs_dilate=..}"
  void window_attr(const Op& op, std::vector<std::pair<std::string, std::string>>& at, const std::vector<int64_t>& size,
                   const char* strides, const char* lhs_dil, const char* rhs_dil, const char* reversal) const {
    auto xs = [](const std::vector<int64_t>& v) {
      std::string s;
      for (size_t k = 0; k < v.size(); ++k) s += (k ? "x" : "") + std::to_string(v[k]);
      return s;
    };
    std::string w = "{size=" + xs(size);
    if (const Attr* a = strides ? op.attr(strides) : nullptr) w += " stride=" + xs(ints(op, *a));
    if (const Attr* a = op.attr("padding")) {
      const auto p = ints(op, *a);
      if (p.size() != 2 * size.size()) malformed(op, "padding needs a low and a high value per window dimension");
      std::string s;
      for (size_t k = 0; k < size.size(); ++k) s += fmt::format("{}{}_{}", k ? "x" : "", p[2 * k], p[2 * k + 1]);
      w += " pad=" + s;
    }
    if (const Attr* a = lhs_dil ? op.attr(lhs_dil) : nullptr) w += " lhs_dilate=" + xs(ints(op, *a));
    if (const Attr* a = rhs_dil ? op.attr(rhs_dil) : nullptr) w += " rhs_dilate=" + xs(ints(op, *a));
    if (const Attr* a = reversal ? op.attr(reversal) : nullptr) {
      std::vector<int64_t> r;
      for (const auto& item : a->items) r.push_back(item.text == "true" || item.text == "1");
      for (int64_t x : r)
        if (x) w += " rhs_reversal=" + xs(r);
    }
    at.emplace_back("window", w + "}");
  }

  // "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]" -> "b01f_01io->b01f", and
  // the kernel's spatial dimensions in order.
  std::pair<std::string, std::vector<size_t>> conv_labels(const Op& op, const std::string& t) const {
    std::vector<std::string> parts(3);
    int part = -1;
    for (size_t k = 0; k < t.size(); ++k) {
      const char c = t[k];
      if (c == '[') {
        if (++part > 2) malformed(op, "bad convolution dimension numbers");
      } else if (c == ']' || c == ',' || c == ' ' || c == 'x' || c == '-' || c == '>') {
      } else if (part >= 0) {
        if (!std::isalnum(uint8_t(c))) malformed(op, "bad convolution dimension numbers");
        parts[size_t(part)] += c;
      }
    }
    if (part != 2) malformed(op, fmt::format("unsupported convolution dimension numbers '{}'", t));
    std::vector<size_t> spatial(parts[1].size(), 0);
    size_t ns = 0;
    for (size_t d = 0; d < parts[1].size(); ++d)
      if (std::isdigit(uint8_t(parts[1][d]))) {
        const size_t k = size_t(parts[1][d] - '0');
        if (k >= spatial.size()) malformed(op, fmt::format("bad spatial dimension {} in '{}'", k, t));
        spatial[k] = d, ++ns;
      }
    spatial.resize(ns);
    return {parts[0] + "_" + parts[1] + "->" + parts[2], spatial};
  }

  // dense<[[0, 1], [2, 3]]> : tensor<2x2xi64> -> "{{0,1},{2,3}}".
  std::string replica_groups(const Op& op, const Attr& g) const {
    if (g.kind == Attr::dialect && g.name.find("replica_group_mesh_axes") != std::string::npos) {
      // #stablehlo.replica_group_mesh_axes<mesh = @m, axes = [#stablehlo.axis_ref<name = "i">]>
      // -> HLO's mesh['i'=4] {'i'}
      const Attr* m = g.field("mesh");
      const Attr* axes = g.field("axes");
      std::string sizes;
      for (const auto& [name, text] : meshes_)
        if (m && name == m->text) sizes = text;
      if (sizes.empty()) malformed(op, "replica_groups name no sdy.mesh");
      std::string names;
      for (const auto& a : axes ? axes->items : std::vector<Attr>{})
        if (const Attr* nm = a.field("name")) names += fmt::format("{}'{}'", names.empty() ? "" : ",", nm->text);
      std::string mesh;
      for (char ch : sizes.substr(2, sizes.size() >= 4 ? sizes.size() - 4 : 0)) mesh += ch == '"' ? '\'' : ch;
      return fmt::format("mesh[{}] {{{}}}", mesh, names);
    }
    if (g.kind != Attr::dense || !g.type || g.type->dims.size() != 2) return "mesh[" + g.text + "]";
    const auto v = ints(op, g);
    const size_t per = size_t(g.type->dims[1]);
    std::string s = "{";
    for (size_t k = 0; per && k < v.size(); k += per) {
      std::vector<std::string> grp;
      for (size_t j = k; j < k + per && j < v.size(); ++j) grp.push_back(std::to_string(v[j]));
      s += fmt::format("{}{{{}}}", k ? "," : "", fmt::join(grp, ","));
    }
    return s + "}";
  }

  // A dense<...> literal as HLO constant text; a splat of several elements
  // becomes a scalar constant and a broadcast.
  Value constant(Scope& sc, const Op& op, Instruction& i, const Attr& v) {
    const Shape& t = i.shape;
    if (t.tuple) malformed(op, "tuple constant");
    const int64_t n = elements(t);
    std::vector<std::string> vals;
    const std::string& text = v.text;
    std::string_view body(text);
    while (!body.empty() && body.front() == ' ') body.remove_prefix(1);
    if (!body.empty() && body.front() == '"') {  // "0x..." raw little-endian bytes
      if (body.size() < 4 || body.substr(1, 2) != "0x" || body.back() != '"') malformed(op, "bad hex constant");
      const std::string_view hex = body.substr(3, body.size() - 4);
      for (char ch : hex)
        if (!std::isxdigit(uint8_t(ch))) malformed(op, fmt::format("'{}' in a hex constant", ch));
      const size_t es = element_bytes(op, t.dtype);
      if (hex.size() % (2 * es)) malformed(op, "hex constant does not hold whole elements");
      for (size_t e = 0; e < hex.size() / (2 * es); ++e) {
        uint64_t bits = 0;
        for (size_t b = 0; b < es; ++b) {
          const std::string byte(hex.substr((e * es + b) * 2, 2));
          bits |= uint64_t(std::stoul(byte, nullptr, 16)) << (8 * b);
        }
        vals.push_back(element_text(op, t.dtype, "", bits, true));
      }
    } else {
      for (const auto& tok : dense_tokens(op, text)) vals.push_back(element_text(op, t.dtype, tok, 0, false));
    }
    // The conformance form's @inputs() are the program's data: tpuc must not
    // fold them away, so the checks test the simulated machine.
    if (current_function_ == "inputs") i.attributes.emplace_back("tpuc.opaque", "true");
    if (vals.size() == 1 && n != 1) {
      Instruction s = make("constant", Shape{false, {}, t.dtype, {}, {}}, 0, op);
      s.name = fresh(sc, op, "splat");
      s.literal = vals[0];
      s.attributes = i.attributes;
      const Value sv = push(sc, s);
      Instruction b = make("broadcast", t, 0, op);
      b.name = i.name;
      b.operands = {sv.name};
      b.attributes.emplace_back("dimensions", "{}");
      return push(sc, b);
    }
    if (int64_t(vals.size()) != n) malformed(op, fmt::format("constant has {} values for {} elements", vals.size(), n));
    std::string lit;
    lit.reserve(vals.size() * 8);
    for (size_t k = 0; k < vals.size(); ++k) lit += (k ? ", " : "") + vals[k];
    i.literal = t.dims.empty() ? lit : "{" + lit + "}";
    i.opcode = "constant";
    return push(sc, i);
  }
  size_t element_bytes(const Op& op, const std::string& dt) const {
    if (dt == "pred" || dt == "s8" || dt == "u8") return 1;
    if (dt == "bf16" || dt == "f16" || dt == "s16" || dt == "u16") return 2;
    if (dt == "f32" || dt == "s32" || dt == "u32") return 4;
    if (dt == "f64" || dt == "s64" || dt == "u64") return 8;
    unsupported(op, fmt::format("constant of element type {}", dt));
  }
  // One element as HLO literal text: from its token, or from its bits.
  std::string element_text(const Op& op, const std::string& dt, const std::string& tok, uint64_t bits, bool from_bits) const {
    const bool is_float = dt == "f32" || dt == "bf16" || dt == "f16" || dt == "f64";
    if (!from_bits && (tok == "true" || tok == "false")) return tok;
    if (!from_bits && !is_float) {
      errno = 0;
      char* end = nullptr;
      if (tok.rfind("0x", 0) == 0 || tok.rfind("0X", 0) == 0) {
        bits = std::strtoull(tok.c_str(), &end, 16);
        from_bits = true;
      } else {
        const long long v = std::strtoll(tok.c_str(), &end, 10);
        if (tok.empty() || *end || errno) malformed(op, fmt::format("bad integer '{}'", tok));
        return std::to_string(v);
      }
      if (*end) malformed(op, fmt::format("bad integer '{}'", tok));
    }
    if (from_bits && !is_float) {
      const size_t es = element_bytes(op, dt);
      if (dt == "pred") return bits ? "true" : "false";
      if (dt[0] == 'u' || es == 8) return std::to_string(bits);
      const uint64_t sign = uint64_t(1) << (8 * es - 1);
      return std::to_string(int64_t((bits & ((sign << 1) - 1)) ^ sign) - int64_t(sign));
    }
    double x = 0;
    if (!from_bits && (tok.rfind("0x", 0) == 0 || tok.rfind("0X", 0) == 0)) {
      char* end = nullptr;
      bits = std::strtoull(tok.c_str(), &end, 16);
      if (*end) malformed(op, fmt::format("bad float bits '{}'", tok));
      from_bits = true;
    }
    if (from_bits) {
      x = isa::float_bits_value(*isa::dtype_from_name(dt), bits);  // dt is f16, bf16, f32 or f64 here
    } else {
      char* end = nullptr;
      x = std::strtod(tok.c_str(), &end);
      if (tok.empty() || *end) malformed(op, fmt::format("bad number '{}'", tok));
    }
    if (std::isnan(x)) return std::signbit(x) ? "-nan" : "nan";  // the sign is kept, as HLO text prints it
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    return fmt::format("{}", x);
  }

  // Custom calls: check.* (the conformance form), sharding annotations, and
  // whatever the importer knows by target name.
  void custom_call(Scope& sc, Op& op, const std::vector<Value>& in) {
    std::string target = op.callee;
    if (op.name.rfind("check.", 0) == 0) target = op.name;  // the check dialect written directly
    if (target.rfind("check.", 0) == 0) {
      const bool dialect = op.name.rfind("check.", 0) == 0;
      std::string kind = target.substr(6);
      const bool with_const = kind.size() > 6 && kind.substr(kind.size() - 6) == "_const";
      if (with_const) kind = kind.substr(0, kind.size() - 6);
      if (kind == "eq") kind = "expect_eq";
      const auto k = isa::check_kind_from_name(kind);
      if (!k) unsupported(op, fmt::format("check {}", target));
      if (sc.parent != nullptr) unsupported(op, "a check inside a region");
      Value actual = in.at(0), expected;
      if (with_const) {
        const Attr* v = nullptr;
        for (const auto& [key, a] : op.attrs)
          if (a.kind == Attr::dense && (key.empty() || key == "value")) v = &a;
        if (!v) malformed(op, "needs a dense<...> value");
        Instruction c = make("constant", actual.shape, 0, op);
        c.name = fresh(sc, op, "expected");
        expected = constant(sc, op, c, *v);
      } else {
        if (in.size() != 2) malformed(op, "a check compares two values");
        expected = in[1];
      }
      if (actual.shape.dtype != expected.shape.dtype || actual.shape.dims != expected.shape.dims)
        malformed(op, fmt::format("compares {} with {}", actual.shape.to_string(), expected.shape.to_string()));
      isa::Check c;
      c.kind = *k;
      // The interpreter's defaults for the custom call; the check dialect's own.
      if (c.kind == isa::CheckKind::expect_almost_eq) c.tolerance = dialect ? 1e-4 : 1e-3;
      if (c.kind == isa::CheckKind::expect_close) c.max_ulp = dialect ? 1 : 3;
      for (const auto& [key, a] : op.attrs) {
        if (key == "tolerance") c.tolerance = std::strtod(a.text.c_str(), nullptr);
        else if (key == "max_ulp_difference") c.max_ulp = uint64_t(ints(op, a).at(0));
        else if (key == "min_ulp_difference") c.min_ulp = uint64_t(ints(op, a).at(0));
      }
      if (c.kind != isa::CheckKind::expect_eq && actual.shape.dtype != "f32" && actual.shape.dtype != "bf16" &&
          actual.shape.dtype != "f16" && actual.shape.dtype != "f64")
        malformed(op, fmt::format("{} needs float values, not {}", kind, actual.shape.dtype));
      FunctionChecks& fc = checks_[sc.comp.name];
      if (fc.checks.empty()) fc.first = op;
      const uint32_t base = uint32_t(2 * fc.values.size());
      c.actual = base, c.expected = base + 1;  // after the function's own results (set_return)
      fc.checks.push_back(c);
      fc.values.emplace_back(actual, expected);
      if (!op.nresults()) return;
      // The older check.eq returns whether all elements are equal: computed
      // on the machine (compare, then an and-reduction).
      if (target != "check.eq" || op.nresults() != 1) malformed(op, "a check defines no value");
      Shape pred = actual.shape, scalar;
      pred.dtype = scalar.dtype = "pred";
      Instruction eq = make("compare", pred, 0, op);
      eq.name = fresh(sc, op, "eq");
      eq.operands = {actual.name, expected.name};
      eq.attributes.emplace_back("direction", "EQ");
      Instruction yes = make("constant", scalar, 0, op);
      yes.name = fresh(sc, op, "true");
      yes.literal = "true";
      std::vector<int64_t> all(pred.dims.size());
      for (size_t d = 0; d < all.size(); ++d) all[d] = int64_t(d);
      Instruction r = make("reduce", scalar, 0, op);
      r.name = fresh(sc, op, "all");
      r.operands = {push(sc, eq).name, push(sc, yes).name};
      r.attributes.emplace_back("dimensions", ints_text(all));
      r.attributes.emplace_back("to_apply", combiner_region(sc, op, "stablehlo.and", "pred"));
      define(sc, op, {push(sc, r)});
      return;
    }
    Instruction i = make("custom-call", op.result_types.size() == 1 ? op.result_types[0] : tuple_of(op.result_types), 0, op);
    i.name = fresh(sc, op, "custom");
    for (const auto& v : in) i.operands.push_back(v.name);
    i.attributes.emplace_back("custom_call_target", "\"" + target + "\"");
    if (op.result_types.size() == 1) return define(sc, op, {push(sc, i)});
    define(sc, op, unpack(sc, op, i));
  }

 private:
  std::string_view s_;
  std::string file_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::vector<size_t> line_starts_;
  std::map<std::string, std::string> loc_aliases_;
  Module m_;
  std::string module_name_;
  std::vector<std::pair<std::string, std::string>> meshes_;  // sdy.mesh @name = <["i"=4]>: name, "<[...]>"
  std::optional<std::string> entry_;
  std::vector<std::string> public_;
  std::map<std::string, std::vector<Shape>> functions_;  // name -> result types
  std::string current_function_;
  std::vector<Shape> last_return_types_;
  int region_counter_ = 0;
  std::vector<std::unique_ptr<Scope>> while_scopes_;
  std::vector<std::vector<Scope::Captured>> branch_captures_;
  struct FunctionChecks {
    Op first;  // the first check, for errors
    std::vector<isa::Check> checks;
    std::vector<std::pair<Value, Value>> values;  // (actual, expected) per check
  };
  std::map<std::string, FunctionChecks> checks_;  // by function

};

}  // namespace

Module parse_stablehlo(std::string_view text, std::string_view filename) {
  return Parser(text, filename).run();
}

bool looks_like_stablehlo(std::string_view text) {
  size_t p = 0;
  for (;;) {
    while (p < text.size() && std::isspace(uint8_t(text[p]))) ++p;
    if (text.substr(p, 2) == "//") {
      while (p < text.size() && text[p] != '\n') ++p;
      continue;
    }
    break;
  }
  const std::string_view rest = text.substr(p);
  for (std::string_view w : {"module", "func.func", "#loc", "\"builtin.module\"", "\"func.func\""})
    if (rest.substr(0, w.size()) == w) return true;
  return false;
}

}  // namespace tpu::hlo

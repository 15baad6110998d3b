#include <fmt/format.h>

#include <cctype>
#include <unordered_map>

#include "tpu/hlo/hlo.h"

namespace tpu::hlo {
namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string_view file) : s_(text), file_(file) {}

  Module module() {
    Module m;
    skip_space();
    expect_word("HloModule");
    m.name = name();
    while (accept(',')) m.attributes.push_back(attribute());
    for (skip_space(); table(); skip_space()) {
    }
    for (skip_space(); pos_ < s_.size(); skip_space()) {
      Computation c = computation();
      if (const Computation* other = m.find(c.name))
        throw Error(fmt::format("{}:{}: computation '{}' is defined twice (first at line {})", file_, c.line, c.name, other->line));
      if (const Computation* other = c.entry ? m.entry() : nullptr)
        throw Error(fmt::format("{}:{}: a second ENTRY computation '{}' (the first is '{}' at line {})", file_, c.line, c.name,
                                other->name, other->line));
      m.computations.push_back(std::move(c));
    }
    if (!m.entry()) throw Error(fmt::format("{}: no ENTRY computation", file_));
    return m;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const { throw Error(fmt::format("{}:{}: {}", file_, line_, msg)); }

  void skip_space() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '\n') ++line_;
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (s_.compare(pos_, 2, "/*") == 0) {
        const size_t end = s_.find("*/", pos_ + 2);
        if (end == std::string_view::npos) fail("unterminated comment");
        for (size_t i = pos_; i < end; ++i) line_ += s_[i] == '\n';
        pos_ = end + 2;
      } else {
        return;
      }
    }
  }
  // Spaces and tabs only: an instruction ends at its line's end.
  void skip_blanks() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool accept(char c) {
    skip_blanks();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(fmt::format("expected '{}', found {}", c, found()));
  }
  std::string found() const {
    if (pos_ >= s_.size()) return "end of file";
    if (s_[pos_] == '\n') return "end of line";
    return fmt::format("'{}'", s_.substr(pos_, std::min<size_t>(12, s_.find('\n', pos_) - pos_)));
  }
  static bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; }
  std::string name() {
    skip_blanks();
    if (pos_ < s_.size() && s_[pos_] == '%') ++pos_;
    const size_t start = pos_;
    while (pos_ < s_.size() && name_char(s_[pos_])) ++pos_;
    if (pos_ == start) fail(fmt::format("expected a name, found {}", found()));
    return std::string(s_.substr(start, pos_ - start));
  }
  void expect_word(std::string_view w) {
    skip_blanks();
    if (s_.compare(pos_, w.size(), w) != 0) fail(fmt::format("expected '{}', found {}", w, found()));
    pos_ += w.size();
  }

  // A value up to the next top-level ',' (or the line's end), with brackets,
  // braces, parentheses and quoted strings balanced.
  std::string value() {
    skip_blanks();
    const size_t start = pos_;
    std::vector<char> open;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        while (pos_ < s_.size() && s_[pos_] != '"') pos_ += s_[pos_] == '\\' ? 2 : 1;
        if (pos_ >= s_.size()) fail("unterminated string");
        ++pos_;
        continue;
      }
      if (c == '\n' && open.empty()) break;
      if (c == '\n') fail(fmt::format("missing '{}'", open.back()));
      if (open.empty() && c == ',') break;
      if (c == '(' || c == '[' || c == '{') open.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      if (c == ')' || c == ']' || c == '}') {
        if (open.empty()) break;
        if (open.back() != c) fail(fmt::format("unbalanced '{}'", c));
        open.pop_back();
      }
      ++pos_;
    }
    if (!open.empty()) fail(fmt::format("missing '{}'", open.back()));
    std::string v(s_.substr(start, pos_ - start));
    while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.pop_back();
    return v;
  }

  std::pair<std::string, std::string> attribute() {
    std::string key = name();
    expect('=');
    return {key, value()};
  }

  Shape shape() {
    skip_blanks();
    Shape sh;
    if (accept('(')) {
      if (++tuple_depth_ > kMaxTupleDepth) fail(fmt::format("tuple shapes nested more than {} deep", kMaxTupleDepth));
      sh.tuple = true;
      if (!accept(')')) {
        do sh.elements.push_back(shape());
        while (accept(','));
        expect(')');
      }
      --tuple_depth_;
      return sh;
    }
    const size_t start = pos_;
    while (pos_ < s_.size() && std::isalnum(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    sh.dtype = std::string(s_.substr(start, pos_ - start));
    if (sh.dtype.empty()) fail(fmt::format("expected a shape, found {}", found()));
    if (sh.dtype == "token") return sh;
    expect('[');
    if (!accept(']')) {
      do sh.dims.push_back(integer());
      while (accept(','));
      expect(']');
    }
    if (accept('{')) {
      if (!accept('}')) {
        do sh.layout.push_back(integer());
        while (accept(','));
        // Tiles, element size, memory space (":T(8,128)S(1)"): how values
        // lie in memory, not what they are.
        if (accept(':'))
          while (pos_ < s_.size() && s_[pos_] != '}' && s_[pos_] != '\n') ++pos_;
        expect('}');
      }
    }
    return sh;
  }

  int64_t integer() {
    skip_blanks();
    const size_t start = pos_;
    if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '?')) ++pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    const std::string t(s_.substr(start, pos_ - start));
    if (t.empty() || t == "-") fail(fmt::format("expected an integer, found {}", found()));
    if (t == "?") fail("dynamic dimensions are not supported (TPUs want static shapes)");
    try {
      return std::stoll(t);
    } catch (const std::exception&) {
      fail(fmt::format("integer '{}' is out of range", t));
    }
  }

  Computation computation() {
    Computation c;
    c.line = line_;
    skip_blanks();
    if (s_.compare(pos_, 5, "ENTRY") == 0 && pos_ + 5 < s_.size() && !name_char(s_[pos_ + 5])) {
      pos_ += 5;
      c.entry = true;
    }
    c.name = name();
    skip_blanks();
    if (accept('(')) {  // an optional signature: (a: f32[], b: f32[]) -> f32[]
      int depth = 1;
      while (pos_ < s_.size() && depth > 0) depth += s_[pos_] == '(' ? 1 : s_[pos_] == ')' ? -1 : 0, ++pos_;
      expect('-');
      expect('>');
      // The result shape runs to the body's '{', the line's last character
      // (a layout after it would look like the body: "-> f32[] {").
      const size_t eol = s_.find('\n', pos_);
      const size_t brace = eol == std::string_view::npos ? s_.find('{', pos_) : s_.find_last_of('{', eol);
      if (brace == std::string::npos || brace < pos_) fail("expected '{' after the computation's signature");
      pos_ = brace;
    }
    expect('{');
    std::unordered_map<std::string, int> lines;  // instruction name -> its line
    std::string root;
    for (skip_space(); pos_ < s_.size() && s_[pos_] != '}'; skip_space()) {
      c.instructions.push_back(instruction());
      const Instruction& in = c.instructions.back();
      if (auto [it, fresh] = lines.emplace(in.name, in.line); !fresh)
        fail(fmt::format("'{}' is defined twice in computation '{}' (first at line {})", in.name, c.name, it->second));
      if (in.root && !root.empty()) fail(fmt::format("a second ROOT in computation '{}' (the first is '{}')", c.name, root));
      if (in.root) root = in.name;
    }
    if (!accept('}')) fail(fmt::format("computation '{}' is not closed", c.name));
    if (c.instructions.empty()) fail(fmt::format("computation '{}' is empty", c.name));
    if (!c.root()) c.instructions.back().root = true;  // the last instruction is the root unless marked
    return c;
  }

  Instruction instruction() {
    Instruction in;
    in.line = line_;
    skip_blanks();
    if (s_.compare(pos_, 4, "ROOT") == 0 && pos_ + 4 < s_.size() && s_[pos_ + 4] == ' ') {
      pos_ += 4;
      in.root = true;
    }
    in.name = name();
    expect('=');
    in.shape = shape();
    skip_blanks();
    const size_t start = pos_;
    while (pos_ < s_.size() && name_char(s_[pos_])) ++pos_;
    in.opcode = std::string(s_.substr(start, pos_ - start));
    if (in.opcode.empty()) fail(fmt::format("expected an opcode, found {}", found()));
    expect('(');
    if (in.opcode == "constant" || in.opcode == "parameter") {
      in.literal = value();
      expect(')');
    } else if (!accept(')')) {
      do {
        std::string op = value();
        // Some printers prefix operands with their shape: "f32[2]{0} %x".
        const size_t sp = op.rfind(' ');
        if (sp != std::string::npos) op = op.substr(sp + 1);
        if (!op.empty() && op[0] == '%') op = op.substr(1);
        if (op.empty()) fail("empty operand");
        in.operands.push_back(op);
      } while (accept(','));
      expect(')');
    }
    while (accept(',')) in.attributes.push_back(attribute());
    if (const std::string* md = in.attribute("metadata")) in.source = metadata_source(*md);
    skip_blanks();
    if (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != '}') fail(fmt::format("unexpected {} after the instruction", found()));
    return in;
  }

  // The tables an optimised dump (XLA's after its passes) starts with:
  // FileNames, FunctionNames, FileLocations and StackFrames, lines of "ID
  // VALUE" each. Kept for the source locations metadata names by
  // stack_frame_id.
  enum Table { kFileNames, kFunctionNames, kFileLocations, kStackFrames, kTables };
  bool table() {
    static constexpr std::string_view kNames[kTables] = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"};
    int t = 0;
    while (t < kTables && !(s_.compare(pos_, kNames[t].size(), kNames[t]) == 0 &&
                            (pos_ + kNames[t].size() == s_.size() || !name_char(s_[pos_ + kNames[t].size()]))))
      ++t;
    if (t == kTables) return false;
    pos_ += kNames[t].size();
    for (skip_space(); pos_ < s_.size() && std::isdigit(uint8_t(s_[pos_])); skip_space()) {
      const int64_t id = integer();
      tables_[t][id] = value();
    }
    return true;
  }
  // The integer after `key=` in a table's or metadata's value; -1 if absent.
  static int64_t field(const std::string& v, std::string_view key) {
    const std::string k = std::string(key) + "=";
    size_t at = v.find(k);
    while (at != std::string::npos && at > 0 && name_char(v[at - 1])) at = v.find(k, at + 1);
    if (at == std::string::npos) return -1;
    at += k.size();
    int64_t n = 0;
    size_t e = at;
    for (; e < v.size() && std::isdigit(uint8_t(v[e])) && n < (int64_t(1) << 40); ++e) n = n * 10 + (v[e] - '0');
    return e == at ? -1 : n;
  }
  // metadata={... stack_frame_id=3} -> "file.py:61" through the tables.
  std::string frame_source(int64_t frame) const {
    const auto get = [&](Table t, int64_t id) {
      const auto it = tables_[t].find(id);
      return it == tables_[t].end() ? std::string() : it->second;
    };
    const std::string loc = get(kFileLocations, field(get(kStackFrames, frame), "file_location_id"));
    std::string file = get(kFileNames, field(loc, "file_name_id"));
    const int64_t line = field(loc, "line");
    if (file.size() < 2 || file.front() != '"' || file.back() != '"' || line < 0) return "";
    return file.substr(1, file.size() - 2) + ":" + std::to_string(line);
  }

  // metadata={op_name="..." source_file="model.py" source_line=12} -> "model.py:12".
  std::string metadata_source(const std::string& md) const {
    const size_t f = md.find("source_file=\""), l = md.find("source_line=");
    if (f == std::string::npos || l == std::string::npos) return frame_source(field(md, "stack_frame_id"));
    const size_t fe = md.find('"', f + 13);
    size_t le = l + 12;
    while (le < md.size() && std::isdigit(uint8_t(md[le]))) ++le;
    if (fe == std::string::npos || le == l + 12) return "";
    return md.substr(f + 13, fe - f - 13) + ":" + md.substr(l + 12, le - l - 12);
  }

  static constexpr int kMaxTupleDepth = 64;  // XLA's own programs nest a few levels

  std::string_view s_;
  std::string file_;
  std::unordered_map<int64_t, std::string> tables_[kTables];  // table()
  size_t pos_ = 0;
  int line_ = 1;
  int tuple_depth_ = 0;
};

}  // namespace

std::string Shape::to_string() const {
  if (tuple) {
    std::vector<std::string> parts;
    for (const auto& e : elements) parts.push_back(e.to_string());
    return fmt::format("({})", fmt::join(parts, ", "));
  }
  return fmt::format("{}[{}]", dtype, fmt::join(dims, ","));
}

const std::string* Instruction::attribute(std::string_view key) const {
  for (const auto& [k, v] : attributes)
    if (k == key) return &v;
  return nullptr;
}

const Instruction* Computation::root() const {
  for (const auto& i : instructions)
    if (i.root) return &i;
  return nullptr;
}

const Instruction* Computation::find(std::string_view n) const {
  for (const auto& i : instructions)
    if (i.name == n) return &i;
  return nullptr;
}

const Computation* Module::entry() const {
  for (const auto& c : computations)
    if (c.entry) return &c;
  return nullptr;
}

const Computation* Module::find(std::string_view n) const {
  if (!n.empty() && n[0] == '%') n.remove_prefix(1);  // to_apply=%region_0.4 (older JAX)
  for (const auto& c : computations)
    if (c.name == n) return &c;
  return nullptr;
}

Module parse(std::string_view text, std::string_view filename) { return Parser(text, filename).module(); }

std::vector<int64_t> parse_int_list(const std::string& value, const Instruction& where) {
  auto fail = [&] { throw Error(fmt::format("line {}: '{}' of {} is not a list of integers", where.line, value, where.name)); };
  if (value.size() < 2 || value.front() != '{' || value.back() != '}') fail();
  std::vector<int64_t> out;
  size_t i = 1;
  while (i < value.size() - 1) {
    while (i < value.size() - 1 && (value[i] == ' ' || value[i] == ',')) ++i;
    if (i >= value.size() - 1) break;
    size_t used = 0;
    try {
      out.push_back(std::stoll(value.substr(i), &used));
    } catch (const std::exception&) {
      fail();
    }
    i += used;
  }
  return out;
}

const std::vector<std::string>& xla_opcodes() {
  static const std::vector<std::string> names = {
      "abs", "add", "add-dependency", "after-all", "all-gather", "all-gather-done", "all-gather-start", "all-reduce",
      "all-reduce-done", "all-reduce-start", "all-to-all", "and", "async-done", "async-start", "async-update", "atan2",
      "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "bitcast", "bitcast-convert", "broadcast", "call",
      "cbrt", "ceil", "cholesky", "clamp", "collective-broadcast", "collective-permute", "collective-permute-done",
      "collective-permute-start", "compare", "complex", "concatenate", "conditional", "constant", "convert", "convolution",
      "copy", "copy-done", "copy-start", "cosine", "count-leading-zeros", "custom-call", "divide", "domain", "dot",
      "dynamic-reshape", "dynamic-slice", "dynamic-update-slice", "erf", "exponential", "exponential-minus-one", "fft",
      "floor", "fusion", "gather", "get-dimension-size", "get-tuple-element", "imag", "infeed", "iota", "is-finite", "log",
      "log-plus-one", "logistic", "map", "maximum", "minimum", "multiply", "negate", "not", "opt-barrier", "or", "outfeed",
      "pad", "parameter", "partition-id", "popcnt", "power", "ragged-all-to-all", "ragged-dot", "real", "recv", "recv-done",
      "reduce", "reduce-precision", "reduce-scatter", "reduce-window", "remainder", "replica-id", "reshape", "reverse",
      "rng", "rng-bit-generator", "rng-get-and-update-state", "round-nearest-afz", "round-nearest-even", "rsqrt", "scatter",
      "select", "select-and-scatter", "send", "send-done", "set-dimension-size", "shift-left", "shift-right-arithmetic",
      "shift-right-logical", "sign", "sine", "slice", "sort", "sqrt", "stochastic-convert", "subtract", "tan", "tanh",
      "topk", "transpose", "triangular-solve", "tuple", "while", "xor"};
  return names;
}

}  // namespace tpu::hlo

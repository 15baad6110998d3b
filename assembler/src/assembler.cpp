// Two-pass assembler. Pass 1 lexes every line, defines labels and `.equ`
// constants and lays out code and data; pass 2 evaluates operands (forward
// references allowed) and encodes. Errors are collected per line.
#include "tpu/asm/assembler.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include "lexer.h"
#include "tpu/isa/isa.h"
#include "tpu/isa/suggest.h"

namespace tpu::as {
namespace {

using isa::OperandKind;

enum class Section { Text, Data };

// Data in an assembly file is for tables and small constants; weights of real
// models reach HBM through --inputs or the compiler's data sections.
constexpr uint64_t kMaxDataBytes = uint64_t(256) << 20;

struct SymbolDef {
  int64_t value;
  int line;
};

// A statement pass 2 encodes. Its line is lexed again there rather than its
// tokens kept: a listing of millions of lines then needs tens of bytes a
// line, not hundreds.
struct Stmt {
  int line;                 // index into lines
  size_t pos;               // first token after labels
  Section section;
  int64_t location;         // instruction index, or HBM address in data
  int segment;              // data segment index, -1 in text
};

// Cursor over one line's tokens with the expression evaluator.
class Parser {
 public:
  using Lookup = std::function<std::optional<int64_t>(const std::string&)>;

  Parser(const std::vector<Token>& toks, size_t pos, Lookup lookup, int64_t dot)
      : toks_(toks), pos_(pos), lookup_(std::move(lookup)), dot_(dot) {}

  const Token& peek() const { return toks_[pos_]; }
  const Token& next() { return toks_[pos_ == toks_.size() - 1 ? pos_ : pos_++]; }
  bool accept(Tok k) {
    if (peek().kind != k) return false;
    next();
    return true;
  }
  const Token& expect(Tok k, const char* what) {
    if (peek().kind != k) fail(peek(), fmt::format("expected {}, found {}", what, describe(peek())));
    return next();
  }
  void expect_end() {
    if (peek().kind != Tok::End) fail(peek(), fmt::format("unexpected {} after the operands", describe(peek())));
  }
  [[noreturn]] static void fail(const Token& t, const std::string& msg) { throw SyntaxError{t.col, msg}; }
  static std::string describe(const Token& t) {
    if (t.kind == Tok::Ident) return fmt::format("'{}'", t.text);
    if (t.kind == Tok::Int) return fmt::format("'{}'", t.text);
    if (t.kind == Tok::String) return fmt::format("\"{}\"", t.text);
    return tok_name(t.kind);
  }

  int64_t expr() { return binary(0); }

 private:
  static int precedence(Tok k) {
    switch (k) {
      case Tok::Pipe: return 1;
      case Tok::Caret: return 2;
      case Tok::Amp: return 3;
      case Tok::Shl:
      case Tok::Shr: return 4;
      case Tok::Plus:
      case Tok::Minus: return 5;
      case Tok::Star:
      case Tok::Slash:
      case Tok::Percent: return 6;
      default: return -1;
    }
  }

  int64_t binary(int min_prec) {
    int64_t lhs = unary();
    for (;;) {
      const Token& op = peek();
      int prec = precedence(op.kind);
      if (prec < 0 || prec < min_prec) return lhs;
      next();
      int64_t rhs = binary(prec + 1);
      lhs = apply(op, lhs, rhs);
    }
  }

  static int64_t apply(const Token& op, int64_t a, int64_t b) {
    const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    switch (op.kind) {
      case Tok::Pipe: return static_cast<int64_t>(ua | ub);
      case Tok::Caret: return static_cast<int64_t>(ua ^ ub);
      case Tok::Amp: return static_cast<int64_t>(ua & ub);
      case Tok::Plus: return static_cast<int64_t>(ua + ub);
      case Tok::Minus: return static_cast<int64_t>(ua - ub);
      case Tok::Star: return static_cast<int64_t>(ua * ub);
      case Tok::Shl:
      case Tok::Shr:
        if (b < 0 || b > 63) fail(op, fmt::format("shift by {} is outside 0..63", b));
        return op.kind == Tok::Shl ? static_cast<int64_t>(ua << b) : a >> b;
      case Tok::Slash:
      case Tok::Percent:
        if (b == 0) fail(op, "division by zero");
        if (a == INT64_MIN && b == -1) return op.kind == Tok::Slash ? a : 0;
        return op.kind == Tok::Slash ? a / b : a % b;
      default: fail(op, "internal error: not a binary operator");
    }
  }

  // Unary operators and parentheses nest by recursion: bounded, so no input
  // overflows the stack.
  static constexpr int kMaxNesting = 256;
  struct Nest {
    explicit Nest(Parser& p, const Token& t) : p_(p) {
      if (++p_.nesting_ > kMaxNesting) fail(t, fmt::format("expression nested more than {} deep", kMaxNesting));
    }
    ~Nest() { --p_.nesting_; }
    Parser& p_;
  };

  int64_t unary() {
    const Token& t = peek();
    const Nest nest(*this, t);
    if (accept(Tok::Minus)) return static_cast<int64_t>(0 - static_cast<uint64_t>(unary()));
    if (accept(Tok::Plus)) return unary();
    if (accept(Tok::Tilde)) return ~unary();
    if (accept(Tok::LParen)) {
      int64_t v = expr();
      expect(Tok::RParen, "')'");
      return v;
    }
    if (accept(Tok::Int)) return static_cast<int64_t>(t.value);
    if (accept(Tok::Dot)) return dot_;
    if (t.kind == Tok::Ident) {
      next();
      if (auto v = lookup_(t.text)) return *v;
      fail(t, fmt::format("undefined symbol '{}'", t.text));
    }
    fail(t, fmt::format("expected an expression, found {}", describe(t)));
  }

  int nesting_ = 0;
  const std::vector<Token>& toks_;
  size_t pos_;
  Lookup lookup_;
  int64_t dot_;
};

std::string suggest_mnemonic(std::string_view m) {
  std::vector<std::string> names;
  for (const auto& s : isa::instructions()) names.emplace_back(s.mnemonic);
  const std::string guess = closest(m, names);
  return guess.empty() ? "" : fmt::format("; did you mean '{}'?", guess);
}

class Assembler {
 public:
  Assembler(std::string_view source, std::string_view filename, const AssembleOptions& options)
      : file_(filename), options_(options) {
    size_t start = 0;
    while (start <= source.size()) {
      size_t nl = source.find('\n', start);
      if (nl == std::string_view::npos) nl = source.size();
      lines_.emplace_back(source.substr(start, nl - start));
      start = nl + 1;
    }
  }

  AssembleResult run() {
    // The target's parameters are symbols (target.mxu_dim, ...) from the
    // moment it is known: the start, unless the file has a .target directive.
    const bool has_directive = std::any_of(lines_.begin(), lines_.end(), [](std::string_view l) {
      const size_t at = l.find_first_not_of(" \t");
      return at != std::string::npos && l.compare(at, 7, ".target") == 0 && (l.size() == at + 7 || !std::isalnum(static_cast<unsigned char>(l[at + 7])));
    });
    if (!has_directive) {
      finish_target();
      define_target_symbols();
    }
    for (size_t i = 0; i < lines_.size() && !too_many(); ++i) pass1(static_cast<int>(i));
    if (has_directive) finish_target();
    for (const Stmt& s : stmts_) {
      if (too_many()) break;
      try {
        pass2(s);
      } catch (const SyntaxError& e) {
        error(s.line, e.col, e.message);
      }
    }
    check_data_overlap();
    finish_kernels();
    AssembleResult result;
    if (errors_.empty()) {
      program_.data.erase(std::remove_if(program_.data.begin(), program_.data.end(),
                                         [](const isa::DataSegment& d) { return d.bytes.empty(); }),
                          program_.data.end());
      try {
        isa::validate(program_);
      } catch (const Error& e) {
        error(last_line(), 1, e.what());
      }
    }
    if (errors_.empty()) result.program = std::move(program_);
    std::stable_sort(errors_.begin(), errors_.end(),
                     [](const Diagnostic& a, const Diagnostic& b) { return std::tie(a.line, a.col) < std::tie(b.line, b.col); });
    result.errors = std::move(errors_);
    return result;
  }

 private:
  bool too_many() const { return errors_.size() >= options_.max_errors; }

  void error(int line, int col, std::string msg) {
    if (too_many()) return;
    Diagnostic d;
    d.file = file_;
    d.line = line + 1;
    d.col = col;
    d.message = std::move(msg);
    d.source_line = lines_[static_cast<size_t>(line)];
    errors_.push_back(std::move(d));
  }

  int last_line() const { return static_cast<int>(lines_.size()) - 1; }

  std::optional<int64_t> lookup(const std::string& name) const {
    auto it = symbols_.find(name);
    if (it == symbols_.end()) return std::nullopt;
    return it->second.value;
  }

  int64_t location() const { return section_ == Section::Text ? int64_t(code_count_) : data_addr_; }

  void define(int line, const Token& t, int64_t value) {
    if (isa::find_mnemonic(t.text) != nullptr)
      throw SyntaxError{t.col, fmt::format("'{}' is an instruction and cannot name a symbol", t.text)};
    if (t.text.rfind("target.", 0) == 0)
      throw SyntaxError{t.col, fmt::format("'{}': names starting with 'target.' are the target's parameters", t.text)};
    auto [it, inserted] = symbols_.emplace(t.text, SymbolDef{value, line});
    if (!inserted)
      throw SyntaxError{t.col, fmt::format("symbol '{}' is already defined on line {}", t.text, it->second.line + 1)};
  }

  void pass1(int line) {
    std::vector<Token> toks;
    try {
      toks = lex_line(lines_[static_cast<size_t>(line)]);
    } catch (const SyntaxError& e) {
      error(line, e.col, e.message);
      return;
    }
    try {
      size_t pos = 0;
      while (toks[pos].kind == Tok::Ident && toks[pos + 1].kind == Tok::Colon) {
        define(line, toks[pos], location());
        pos += 2;
      }
      const Token& head = toks[pos];
      if (head.kind == Tok::End) return;
      if (head.kind != Tok::Ident) throw SyntaxError{head.col, fmt::format("expected an instruction or directive, found {}", Parser::describe(head))};
      Parser p(toks, pos + 1, [this](const std::string& n) { return lookup(n); }, location());
      if (head.text[0] == '.') {
        directive1(line, head, p, toks, pos);
        return;
      }
      if (section_ != Section::Text) throw SyntaxError{head.col, "instruction in a .data section (use .text first)"};
      if (isa::find_mnemonic(head.text) == nullptr)
        throw SyntaxError{head.col, fmt::format("unknown instruction '{}'{}", head.text, suggest_mnemonic(head.text))};
      if (code_count_ == isa::kMaxInstructions) throw SyntaxError{head.col, "too many instructions"};
      keep(line, pos);
      ++code_count_;
    } catch (const SyntaxError& e) {
      error(line, e.col, e.message);
    }
  }

  void keep(int line, size_t pos) {
    stmts_.push_back(Stmt{line, pos, section_, location(), section_ == Section::Data ? int(program_.data.size()) - 1 : -1});
  }

  static size_t data_width(std::string_view d) {
    if (d == ".byte") return 1;
    if (d == ".half") return 2;
    if (d == ".word") return 4;
    if (d == ".dword") return 8;
    return 0;
  }

  void directive1(int line, const Token& head, Parser& p, const std::vector<Token>& toks, size_t pos) {
    const std::string& d = head.text;
    if (d == ".text") {
      p.expect_end();
      section_ = Section::Text;
    } else if (d == ".data") {
      int64_t addr = p.expr();
      p.expect_end();
      if (addr < 0) throw SyntaxError{toks[pos + 1].col, fmt::format(".data address {} is negative", addr)};
      section_ = Section::Data;
      data_addr_ = addr;
      program_.data.push_back(isa::DataSegment{static_cast<uint64_t>(addr), {}});
      segment_lines_.push_back(line);
    } else if (d == ".equ" || d == ".set") {
      const Token& name = p.expect(Tok::Ident, "a symbol name");
      p.expect(Tok::Comma, "','");
      int64_t v = p.expr();
      p.expect_end();
      define(line, name, v);
    } else if (size_t w = data_width(d)) {
      if (section_ != Section::Data) throw SyntaxError{head.col, fmt::format("{} outside a .data section", d)};
      size_t count = 1;
      for (size_t i = pos + 1; toks[i].kind != Tok::End; ++i) count += toks[i].kind == Tok::Comma;
      keep(line, pos);
      advance_data(head, count * w);
    } else if (d == ".zero") {
      if (section_ != Section::Data) throw SyntaxError{head.col, ".zero outside a .data section"};
      int64_t n = p.expr();
      p.expect_end();
      if (n < 0) throw SyntaxError{toks[pos + 1].col, fmt::format(".zero {} is negative", n)};
      keep(line, pos);
      advance_data(head, static_cast<uint64_t>(n));
    } else if (d == ".target") {
      target_directive(line, head, p);
    } else if (d == ".in_kernel") {
      // Instructions from here on belong to kernel N (-1: to none).
      const Token& t = p.peek();
      const int64_t k = p.expr();
      p.expect_end();
      if (k < -1 || k >= int64_t(isa::kMaxKernels)) throw SyntaxError{t.col, fmt::format(".in_kernel {} is not a kernel number or -1", k)};
      if (section_ != Section::Text) throw SyntaxError{head.col, ".in_kernel outside .text"};
      in_kernel_.push_back({code_count_, k < 0 ? isa::kNoKernel : uint32_t(k), line});
    } else if (d == ".input" || d == ".output" || d == ".const" || d == ".check" || d == ".kernel" || d == ".hbm_peak" || d == ".inst") {
      if (d == ".inst") {
        if (section_ != Section::Text) throw SyntaxError{head.col, ".inst outside .text"};
        if (code_count_ == isa::kMaxInstructions) throw SyntaxError{head.col, "too many instructions"};
        ++code_count_;
        stmts_.push_back(Stmt{line, pos, Section::Text, int64_t(code_count_) - 1, -1});
        return;
      }
      keep(line, pos);
    } else {
      throw SyntaxError{head.col, fmt::format("unknown directive '{}'", d)};
    }
  }

  void advance_data(const Token& head, uint64_t n) {
    if (n > kMaxDataBytes - data_bytes_)
      throw SyntaxError{head.col, fmt::format("more than {} MiB of data in one program", kMaxDataBytes >> 20)};
    data_bytes_ += n;
    data_addr_ += static_cast<int64_t>(n);
    program_.data.back().bytes.resize(program_.data.back().bytes.size() + n);
  }

  void pass2(const Stmt& s) {
    const std::vector<Token> toks = lex_line(lines_[static_cast<size_t>(s.line)]);
    Parser p(toks, s.pos + 1, [this](const std::string& n) { return lookup(n); }, s.location);
    const Token& head = toks[s.pos];
    if (head.text[0] == '.') return directive2(s, head, p);
    const isa::InsnSpec* spec = isa::find_mnemonic(head.text);
    const auto& ops = isa::format_spec(spec->format).operands;
    isa::Instruction insn;
    insn.op = spec->op;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (i > 0) p.expect(Tok::Comma, fmt::format("',' before operand {} ({})", i + 1, ops[i].role).c_str());
      insn[i] = operand(p, ops[i], s.location);
    }
    if (p.peek().kind == Tok::Comma) Parser::fail(p.peek(), fmt::format("'{}' takes {} operands", spec->mnemonic, ops.size()));
    p.expect_end();
    program_.code.push_back(isa::encode(insn));
  }

  int64_t operand(Parser& p, const isa::OperandSpec& o, int64_t pc) {
    const Token& t = p.peek();
    if (const char* prefix = isa::register_prefix(o.kind)) {
      std::string_view pre(prefix);
      auto bad = [&] {
        Parser::fail(t, fmt::format("expected a {} ({}0..{}{}) for {}, found {}", isa::kind_name(o.kind), prefix, prefix,
                                    isa::register_count(o.kind) - 1, o.role, Parser::describe(t)));
      };
      if (t.kind != Tok::Ident || t.text.size() <= pre.size() || t.text.compare(0, pre.size(), pre) != 0) bad();
      std::string_view num = std::string_view(t.text).substr(pre.size());
      if (num.size() > 3 || !std::all_of(num.begin(), num.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) ||
          (num.size() > 1 && num[0] == '0'))
        bad();
      int v = std::stoi(std::string(num));
      if (v >= isa::register_count(o.kind)) bad();
      p.next();
      return v;
    }
    if (o.kind == OperandKind::Unit || o.kind == OperandKind::MxuDtype || o.kind == OperandKind::Csr) {
      if (t.kind == Tok::Ident)
        if (auto v = isa::enum_lookup(o.kind, t.text)) {
          p.next();
          return *v;
        }
      std::string names;
      for (const auto& e : isa::enum_values())
        if (e.kind == o.kind) names += (names.empty() ? "" : ", ") + std::string(e.name);
      Parser::fail(t, fmt::format("expected a {} ({}) for {}, found {}", isa::kind_name(o.kind), names, o.role, Parser::describe(t)));
    }
    int64_t v = p.expr();
    if (o.kind == OperandKind::Pcrel32) v = static_cast<int64_t>(static_cast<uint64_t>(v) - static_cast<uint64_t>(pc));
    if (o.kind == OperandKind::Bits32 && v < 0 && v >= INT32_MIN) v += int64_t(1) << 32;
    if (auto err = isa::check_operand(o.kind, v)) throw SyntaxError{t.col, fmt::format("{}: {}", o.role, *err)};
    return v;
  }

  void directive2(const Stmt& s, const Token& head, Parser& p) {
    const std::string& d = head.text;
    if (size_t w = data_width(d)) {
      auto& seg = program_.data[static_cast<size_t>(s.segment)];
      size_t at = static_cast<size_t>(s.location - static_cast<int64_t>(seg.hbm_addr));
      const int64_t lo = w == 8 ? INT64_MIN : -(int64_t(1) << (8 * w - 1));
      const int64_t hi = w == 8 ? INT64_MAX : (int64_t(1) << (8 * w)) - 1;
      do {
        const Token& t = p.peek();
        int64_t v = p.expr();
        if (v < lo || v > hi) throw SyntaxError{t.col, fmt::format("{} value {} does not fit in {} bytes", d, v, w)};
        for (size_t b = 0; b < w; ++b) seg.bytes[at++] = uint8_t(static_cast<uint64_t>(v) >> (8 * b));
      } while (p.accept(Tok::Comma));
      p.expect_end();
    } else if (d == ".zero") {
      // The bytes were reserved (zeroed) in pass 1.
    } else if (d == ".inst") {
      const Token& t = p.peek();
      int64_t v = p.expr();
      p.expect_end();
      if (isa::decode(static_cast<uint64_t>(v)))
        throw SyntaxError{t.col, ".inst word decodes as an instruction: write the instruction instead"};
      program_.code.push_back(static_cast<uint64_t>(v));
    } else if (d == ".check") {
      check_directive(p);
    } else if (d == ".kernel") {
      kernel_directive(p);
    } else if (d == ".hbm_peak") {
      // .hbm_peak BYTES: the HBM the program uses (docs/program-format.md).
      const Token& t = p.peek();
      const int64_t v = p.expr();
      p.expect_end();
      if (program_.hbm_peak != 0) Parser::fail(head, ".hbm_peak is given twice");
      if (v <= 0) Parser::fail(t, fmt::format(".hbm_peak {} is not a positive number of bytes", v));
      program_.hbm_peak = uint64_t(v);
    } else {
      symbol_directive(head, p);
    }
  }

  // .kernel N, "name"[, "op", work]...: kernel N (numbered from 0 in order)
  // and the HLO ops it computes, for profiles.
  void kernel_directive(Parser& p) {
    const Token& nt = p.peek();
    const int64_t n = p.expr();
    if (n != int64_t(program_.kernels.size()))
      Parser::fail(nt, fmt::format("kernel {} is defined where kernel {} comes next (they are numbered from 0 in order)", n,
                                   program_.kernels.size()));
    if (program_.kernels.size() == isa::kMaxKernels) Parser::fail(nt, fmt::format("more than {} kernels", isa::kMaxKernels));
    isa::KernelInfo k;
    p.expect(Tok::Comma, "','");
    k.name = p.expect(Tok::String, "the kernel's name as a string").text;
    while (p.accept(Tok::Comma)) {
      isa::KernelOp op;
      op.op = p.expect(Tok::String, "an op as a string").text;
      p.expect(Tok::Comma, "',' and the op's work");
      const Token& wt = p.peek();
      const int64_t w = p.expr();
      if (w < 0) Parser::fail(wt, fmt::format("work {} is negative", w));
      op.work = uint64_t(w);
      if (k.ops.size() == isa::kMaxKernelOps) Parser::fail(wt, fmt::format("more than {} ops in one kernel", isa::kMaxKernelOps));
      k.ops.push_back(std::move(op));
    }
    p.expect_end();
    program_.kernels.push_back(std::move(k));
  }

  // The pc map from the .in_kernel marks.
  void finish_kernels() {
    if (in_kernel_.empty() && program_.kernels.empty()) return;
    if (program_.kernels.empty()) {
      error(in_kernel_.front().line, 1, ".in_kernel without any .kernel");
      return;
    }
    program_.kernel_of.assign(code_count_, isa::kNoKernel);
    for (size_t i = 0; i < in_kernel_.size(); ++i) {
      const auto& m = in_kernel_[i];
      if (m.kernel != isa::kNoKernel && m.kernel >= program_.kernels.size())
        error(m.line, 1, fmt::format(".in_kernel {}: there are {} kernels", m.kernel, program_.kernels.size()));
      const size_t end = i + 1 < in_kernel_.size() ? in_kernel_[i + 1].pc : code_count_;
      std::fill(program_.kernel_of.begin() + long(m.pc), program_.kernel_of.begin() + long(end), m.kernel);
    }
  }

  // .check KIND, ACTUAL, EXPECTED[, tolerance="X"][, min_ulp=N][, max_ulp=N]
  // over two outputs declared before it.
  void check_directive(Parser& p) {
    const Token& kt = p.expect(Tok::Ident, "a check kind (expect_eq, expect_almost_eq, expect_close)");
    const auto kind = isa::check_kind_from_name(kt.text);
    if (!kind) Parser::fail(kt, fmt::format("unknown check kind '{}'", kt.text));
    isa::Check c;
    c.kind = *kind;
    auto output = [&]() -> uint32_t {
      p.expect(Tok::Comma, "','");
      const Token& t = p.expect(Tok::Ident, "an output name");
      uint32_t n = 0;
      for (const auto& s : program_.symbols) {
        if (s.kind != isa::SymbolKind::Output) continue;
        if (s.name == t.text) return n;
        ++n;
      }
      Parser::fail(t, fmt::format("'{}' is not an output declared before this .check", t.text));
    };
    c.actual = output();
    c.expected = output();
    if (c.kind == isa::CheckKind::expect_almost_eq) c.tolerance = 1e-3;
    if (c.kind == isa::CheckKind::expect_close) c.max_ulp = 3;
    std::map<std::string, bool> given;
    while (p.accept(Tok::Comma)) {
      const Token& key = p.expect(Tok::Ident, "tolerance, min_ulp or max_ulp");
      p.expect(Tok::Eq, "'='");
      const bool tol = key.text == "tolerance", ulp = key.text == "min_ulp" || key.text == "max_ulp";
      if ((!tol && !ulp) || (tol && c.kind != isa::CheckKind::expect_almost_eq) || (ulp && c.kind != isa::CheckKind::expect_close))
        Parser::fail(key, fmt::format("{} takes no parameter '{}'", kt.text, key.text));
      if (given[key.text]) Parser::fail(key, fmt::format("'{}' is given twice", key.text));
      given[key.text] = true;
      if (tol) {
        const Token& v = p.expect(Tok::String, "a quoted number, e.g. \"1e-3\"");
        char* end = nullptr;
        c.tolerance = std::strtod(v.text.c_str(), &end);
        if (v.text.empty() || *end || !(c.tolerance >= 0 && c.tolerance <= 1e300))
          Parser::fail(v, fmt::format("tolerance \"{}\" is not a finite number >= 0", v.text));
      } else {
        const Token& vt = p.peek();
        const int64_t v = p.expr();
        if (v < 0) Parser::fail(vt, fmt::format("{} must not be negative", key.text));
        (key.text == "min_ulp" ? c.min_ulp : c.max_ulp) = uint64_t(v);
      }
    }
    p.expect_end();
    const auto outs = program_.outputs();
    if (outs[c.actual]->dtype != outs[c.expected]->dtype || outs[c.actual]->dims != outs[c.expected]->dims)
      Parser::fail(kt, fmt::format("'{}' and '{}' differ in dtype or shape", outs[c.actual]->name, outs[c.expected]->name));
    if (c.min_ulp > c.max_ulp) Parser::fail(kt, fmt::format("min_ulp {} is above max_ulp {}", c.min_ulp, c.max_ulp));
    if (program_.checks.size() == isa::kMaxChecks) Parser::fail(kt, fmt::format("more than {} checks", isa::kMaxChecks));
    program_.checks.push_back(c);
  }

  void target_directive(int line, const Token& head, Parser& p) {
    if (target_line_ >= 0) throw SyntaxError{head.col, fmt::format(".target is already given on line {}", target_line_ + 1)};
    target_line_ = line;
    const Token& name = p.next();
    isa::Target t;
    std::map<std::string, bool> given;
    if (name.kind == Tok::Ident) {
      try {
        t = isa::load_target(name.text);
      } catch (const Error& e) {
        throw SyntaxError{name.col, e.what()};
      }
      if (!isa::preset_text(name.text)) throw SyntaxError{name.col, fmt::format("unknown preset '{}'{}", name.text, did_you_mean(name.text, isa::preset_names()))};
    } else if (name.kind == Tok::String) {
      t.name = name.text;
    } else {
      Parser::fail(name, "expected a preset name or a quoted target name after .target");
    }
    while (p.accept(Tok::Comma)) {
      const Token& key = p.expect(Tok::Ident, "a target parameter");
      p.expect(Tok::Eq, "'='");
      const Token& vt = p.peek();
      int64_t v = p.expr();
      const auto& fields = isa::target_fields();
      auto f = std::find_if(fields.begin(), fields.end(), [&](const isa::TargetField& f) { return key.text == f.key; });
      if (f == fields.end()) Parser::fail(key, fmt::format("unknown target parameter '{}'", key.text));
      if (given[key.text]) Parser::fail(key, fmt::format("target parameter '{}' is given twice", key.text));
      if (v < 0) Parser::fail(vt, fmt::format("target.{} must not be negative", key.text));
      given[key.text] = true;
      t.*(f->member) = static_cast<uint64_t>(v);
    }
    p.expect_end();
    if (name.kind == Tok::String)
      for (const auto& f : isa::target_fields())
        if (!given[f.key]) Parser::fail(name, fmt::format("a target that is not a preset needs every parameter: '{}' is missing", f.key));
    try {
      isa::validate(t);
    } catch (const Error& e) {
      throw SyntaxError{head.col, e.what()};
    }
    target_col_ = head.col;
    program_.target = std::move(t);
    define_target_symbols();
  }

  void define_target_symbols() {
    for (const auto& f : isa::target_fields())
      symbols_[std::string("target.") + f.key] = SymbolDef{static_cast<int64_t>(program_.target.*f.member), -1};
  }

  void symbol_directive(const Token& head, Parser& p) {
    isa::TensorSymbol sym;
    sym.kind = head.text == ".input" ? isa::SymbolKind::Input
               : head.text == ".output" ? isa::SymbolKind::Output
                                        : isa::SymbolKind::Constant;
    sym.name = p.expect(Tok::Ident, "a tensor name").text;
    p.expect(Tok::Comma, "','");
    const Token& dt = p.expect(Tok::Ident, "a dtype (f32, bf16, s8, s32, pred, ...)");
    auto dtype = isa::dtype_from_name(dt.text);
    if (!dtype) Parser::fail(dt, fmt::format("unknown dtype '{}'", dt.text));
    sym.dtype = *dtype;
    p.expect(Tok::LBrack, "'[' after the dtype");
    if (!p.accept(Tok::RBrack)) {
      do {
        const Token& t = p.peek();
        int64_t v = p.expr();
        if (v < 0) Parser::fail(t, fmt::format("dimension {} is negative", v));
        if (sym.dims.size() == isa::kMaxRank) Parser::fail(t, fmt::format("rank above {}", isa::kMaxRank));
        sym.dims.push_back(static_cast<uint64_t>(v));
      } while (p.accept(Tok::Comma));
      p.expect(Tok::RBrack, "']'");
    }
    p.expect(Tok::Comma, "','");
    const Token& at = p.peek();
    int64_t addr = p.expr();
    if (p.accept(Tok::Comma)) {  // `tiles [a, b, ...]`: split over the chips (docs/system.md)
      const Token& kw = p.expect(Tok::Ident, "'tiles'");
      if (kw.text != "tiles") Parser::fail(kw, fmt::format("expected 'tiles [...]' after the address, not '{}'", kw.text));
      p.expect(Tok::LBrack, "'[' after 'tiles'");
      do {
        const Token& t = p.peek();
        const int64_t v = p.expr();
        if (v < 1) Parser::fail(t, fmt::format("{} tiles: at least 1", v));
        if (sym.tiles.size() == sym.dims.size()) Parser::fail(t, fmt::format("more tiles than the {} dimensions", sym.dims.size()));
        if (sym.dims[sym.tiles.size()] % uint64_t(v) != 0)
          Parser::fail(t, fmt::format("{} tiles do not divide dimension {} of {}", v, sym.tiles.size(), sym.dims[sym.tiles.size()]));
        sym.tiles.push_back(uint64_t(v));
      } while (p.accept(Tok::Comma));
      p.expect(Tok::RBrack, "']'");
      if (sym.tiles.size() != sym.dims.size())
        Parser::fail(kw, fmt::format("{} tiles for {} dimensions", sym.tiles.size(), sym.dims.size()));
      if (p.accept(Tok::Comma)) {  // `tile_of [t0, t1, ...]`: the tile each chip holds (partly replicated)
        const Token& kw2 = p.expect(Tok::Ident, "'tile_of'");
        if (kw2.text != "tile_of") Parser::fail(kw2, fmt::format("expected 'tile_of [...]' after the tiles, not '{}'", kw2.text));
        p.expect(Tok::LBrack, "'[' after 'tile_of'");
        do {
          const Token& t = p.peek();
          const int64_t v = p.expr();
          if (v < 0 || uint64_t(v) >= sym.tile_count()) Parser::fail(t, fmt::format("tile {}: 0 to {}", v, sym.tile_count() - 1));
          if (sym.tile_of.size() == program_.target.chips) Parser::fail(t, fmt::format("more than the {} chips", program_.target.chips));
          sym.tile_of.push_back(uint32_t(v));
        } while (p.accept(Tok::Comma));
        p.expect(Tok::RBrack, "']'");
        if (sym.tile_of.size() != program_.target.chips)
          Parser::fail(kw2, fmt::format("tile_of for {} chips, the target has {} (target.chips)", sym.tile_of.size(), program_.target.chips));
      } else if (sym.tile_count() != program_.target.chips) {
        Parser::fail(kw, fmt::format("{} tiles, but the target has {} chip(s) (target.chips)", sym.tile_count(), program_.target.chips));
      }
    }
    p.expect_end();
    if (addr < 0) Parser::fail(at, fmt::format("address {} is negative", addr));
    sym.hbm_addr = static_cast<uint64_t>(addr);
    for (const auto& other : program_.symbols)
      if (other.name == sym.name) Parser::fail(head, fmt::format("tensor '{}' is already declared", sym.name));
    const uint64_t hbm = program_.target.hbm_bytes;
    if (sym.local_bytes() > hbm || sym.hbm_addr > hbm - sym.local_bytes())
      Parser::fail(at, fmt::format("tensor '{}' ({} bytes at {:#x}) does not fit in HBM of {} bytes", sym.name,
                                   sym.local_bytes(), sym.hbm_addr, hbm));
    program_.symbols.push_back(std::move(sym));
  }

  void check_data_overlap() {
    std::vector<size_t> order(program_.data.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return program_.data[a].hbm_addr < program_.data[b].hbm_addr; });
    for (size_t k = 0; k + 1 < order.size(); ++k) {
      const auto& a = program_.data[order[k]];
      const auto& b = program_.data[order[k + 1]];
      if (!a.bytes.empty() && !b.bytes.empty() && b.hbm_addr < a.hbm_addr + a.bytes.size()) {
        const size_t later = std::max(order[k], order[k + 1]);
        error(segment_lines_[later], 1, fmt::format("data at {:#x} overlaps the {} bytes at {:#x} (line {})", program_.data[later].hbm_addr,
                                                    a.bytes.size(), a.hbm_addr, segment_lines_[std::min(order[k], order[k + 1])] + 1));
      }
    }
  }

  void finish_target() {
    if (target_line_ < 0) {
      try {
        program_.target = options_.target ? *options_.target : isa::load_target(kDefaultPreset);
      } catch (const Error& e) {
        error(0, 1, e.what());
      }
      return;
    }
    if (options_.target && !(*options_.target == program_.target))
      error(target_line_, target_col_,
            fmt::format("the file's .target '{}' differs from --config '{}'", program_.target.name, options_.target->name));
  }

  std::string file_;
  AssembleOptions options_;
  std::vector<std::string_view> lines_;  // views into the source, which outlives the assembler
  std::vector<Stmt> stmts_;
  std::unordered_map<std::string, SymbolDef> symbols_;
  std::vector<Diagnostic> errors_;
  isa::Program program_;
  Section section_ = Section::Text;
  size_t code_count_ = 0;
  struct KernelMark {
    size_t pc;
    uint32_t kernel;
    int line;
  };
  std::vector<KernelMark> in_kernel_;
  int64_t data_addr_ = 0;
  std::vector<int> segment_lines_;  // the .data line of each segment
  uint64_t data_bytes_ = 0;
  int target_line_ = -1;
  int target_col_ = 1;
};

}  // namespace

std::string Diagnostic::render() const {
  // A long line is quoted around the column: at most kWidth characters,
  // "..." where it is cut.
  constexpr size_t kWidth = 120;
  const size_t at = std::min(source_line.size(), size_t(std::max(col, 1) - 1));
  const size_t from = source_line.size() <= kWidth || at < kWidth / 2 ? 0 : std::min(at - kWidth / 2, source_line.size() - kWidth);
  const size_t to = std::min(source_line.size(), from + kWidth);
  std::string quoted = (from > 0 ? "..." : "") + source_line.substr(from, to - from) + (to < source_line.size() ? "..." : "");
  std::string caret(from > 0 ? 3 : 0, ' ');
  for (size_t i = from; i < at; ++i) caret += source_line[i] == '\t' ? '\t' : ' ';
  return fmt::format("{}:{}:{}: error: {}\n{}\n{}^\n", file, line, col, message, quoted, caret);
}

AssembleResult assemble(std::string_view source, std::string_view filename, const AssembleOptions& options) {
  return Assembler(source, filename, options).run();
}

}  // namespace tpu::as

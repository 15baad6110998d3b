#include "lexer.h"

#include <fmt/format.h>

namespace tpu::as {
namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 99;
}

}  // namespace

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::Ident: return "identifier";
    case Tok::Int: return "integer";
    case Tok::String: return "string";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBrack: return "'['";
    case Tok::RBrack: return "']'";
    case Tok::Plus: return "'+'";
    case Tok::Minus: return "'-'";
    case Tok::Star: return "'*'";
    case Tok::Slash: return "'/'";
    case Tok::Percent: return "'%'";
    case Tok::Shl: return "'<<'";
    case Tok::Shr: return "'>>'";
    case Tok::Amp: return "'&'";
    case Tok::Pipe: return "'|'";
    case Tok::Caret: return "'^'";
    case Tok::Tilde: return "'~'";
    case Tok::Eq: return "'='";
    case Tok::Dot: return "'.'";
    case Tok::End: return "end of line";
  }
  return "?";
}

std::vector<Token> lex_line(std::string_view line) {
  std::vector<Token> out;
  size_t i = 0;
  const size_t n = line.size();
  while (i < n) {
    const char c = line[i];
    const int col = static_cast<int>(i) + 1;
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '#' || c == ';' || (c == '/' && i + 1 < n && line[i + 1] == '/')) break;
    Token t;
    t.col = col;
    if (c == '.' && !(i + 1 < n && ident_start(line[i + 1]) && line[i + 1] != '.')) {
      t.kind = Tok::Dot;
      t.text = ".";
      ++i;
    } else if (ident_start(c)) {
      size_t j = i;
      while (j < n && ident_char(line[j])) ++j;
      t.kind = Tok::Ident;
      t.text = std::string(line.substr(i, j - i));
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      int base = 10;
      size_t j = i;
      if (c == '0' && i + 1 < n && (line[i + 1] == 'x' || line[i + 1] == 'X')) base = 16, j += 2;
      else if (c == '0' && i + 1 < n && (line[i + 1] == 'b' || line[i + 1] == 'B')) base = 2, j += 2;
      else if (c == '0' && i + 1 < n && (line[i + 1] == 'o' || line[i + 1] == 'O')) base = 8, j += 2;
      const size_t digits = j;
      uint64_t v = 0;
      bool overflow = false;
      while (j < n && std::isalnum(static_cast<unsigned char>(line[j]))) {
        int d = digit_value(line[j]);
        if (d >= base) throw SyntaxError{static_cast<int>(j) + 1, fmt::format("invalid digit '{}' in a base-{} number", line[j], base)};
        if (v > (UINT64_MAX - uint64_t(d)) / uint64_t(base)) overflow = true;
        v = v * uint64_t(base) + uint64_t(d);
        ++j;
      }
      if (j == digits) throw SyntaxError{col, "number has no digits"};
      if (overflow) throw SyntaxError{col, "number does not fit in 64 bits"};
      t.kind = Tok::Int;
      t.value = v;
      t.text = std::string(line.substr(i, j - i));
      i = j;
    } else if (c == '"') {
      size_t j = i + 1;
      std::string s;
      while (j < n && line[j] != '"') {
        if (line[j] == '\\' && j + 1 < n) ++j;
        s += line[j++];
      }
      if (j >= n) throw SyntaxError{col, "unterminated string"};
      t.kind = Tok::String;
      t.text = std::move(s);
      i = j + 1;
    } else {
      auto two = i + 1 < n ? line.substr(i, 2) : std::string_view();
      if (two == "<<" || two == ">>") {
        t.kind = two == "<<" ? Tok::Shl : Tok::Shr;
        t.text = std::string(two);
        i += 2;
      } else {
        switch (c) {
          case ',': t.kind = Tok::Comma; break;
          case ':': t.kind = Tok::Colon; break;
          case '(': t.kind = Tok::LParen; break;
          case ')': t.kind = Tok::RParen; break;
          case '[': t.kind = Tok::LBrack; break;
          case ']': t.kind = Tok::RBrack; break;
          case '+': t.kind = Tok::Plus; break;
          case '-': t.kind = Tok::Minus; break;
          case '*': t.kind = Tok::Star; break;
          case '/': t.kind = Tok::Slash; break;
          case '%': t.kind = Tok::Percent; break;
          case '&': t.kind = Tok::Amp; break;
          case '|': t.kind = Tok::Pipe; break;
          case '^': t.kind = Tok::Caret; break;
          case '~': t.kind = Tok::Tilde; break;
          case '=': t.kind = Tok::Eq; break;
          default: {
            unsigned char u = static_cast<unsigned char>(c);
            if (u < 0x20 || u >= 0x7f) throw SyntaxError{col, fmt::format("unexpected byte 0x{:02x}", u)};
            throw SyntaxError{col, fmt::format("unexpected character '{}'", c)};
          }
        }
        t.text = std::string(1, c);
        ++i;
      }
    }
    out.push_back(std::move(t));
  }
  Token end;
  end.kind = Tok::End;
  end.col = static_cast<int>(n) + 1;
  out.push_back(end);
  return out;
}

}  // namespace tpu::as

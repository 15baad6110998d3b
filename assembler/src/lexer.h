// Line-oriented lexer for tpu assembly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpu::as {

enum class Tok {
  Ident,
  Int,
  String,
  Comma,
  Colon,
  LParen,
  RParen,
  LBrack,
  RBrack,
  Plus,
  Minus,
  Star,
  Slash,
  Percent,
  Shl,
  Shr,
  Amp,
  Pipe,
  Caret,
  Tilde,
  Eq,
  Dot,
  End
};

struct Token {
  Tok kind = Tok::End;
  std::string text;   // identifier name, string contents, or the token's spelling
  uint64_t value = 0; // Int: the literal's bits
  int col = 1;        // 1-based column in the line
};

// An error at a column of the current line.
struct SyntaxError {
  int col;
  std::string message;
};

// Splits one line (without its newline) into tokens, dropping the comment.
// Throws SyntaxError. The last token is always Tok::End.
std::vector<Token> lex_line(std::string_view line);

const char* tok_name(Tok t);

}  // namespace tpu::as

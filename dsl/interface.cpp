#include "dsl/interface.h"

namespace bdsl {

const char* to_string(Access a) {
  switch (a) {
    case Access::Read: return "read";
    case Access::Write: return "write";
    case Access::ReadWrite: return "read-write";
  }
  return "?";
}

std::string to_string(const MatrixShape& s) {
  const Type ab{s.ab, 1}, c{s.c, 1};
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " " + to_string(ab) + "*" +
         to_string(ab) + "+" + to_string(c);
}

}  // namespace bdsl

#include "codegen/kernel_interface.h"

namespace bdsl {

const char* to_string(Access a) {
  switch (a) {
    case Access::Read: return "read";
    case Access::Write: return "write";
    case Access::ReadWrite: return "read-write";
  }
  return "?";
}

}  // namespace bdsl

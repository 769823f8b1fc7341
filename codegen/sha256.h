// SHA-256 of a byte string, as 64 lowercase hex digits (OpenSSL's EVP interface).
#pragma once
#include <string>
#include <string_view>

namespace bdsl::codegen {

std::string sha256_hex(std::string_view data);

}  // namespace bdsl::codegen

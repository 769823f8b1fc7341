// One row of ops::token_logprobs' output (ops/head/token_logprobs.h: the token, its
// log-probability's f32 bits, then (id, bits) pairs of the alternatives) as models::TokenLogprobs,
// for every reader of that output (a batched step's rows, a prompt's scored rows).
#pragma once
#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string_view>

#include "models/logprobs.h"

namespace bdsl::bitnet {

// `top` alternatives from the row's words; std::logic_error when the row is not of `token`
// (`row` names it in the message).
inline models::TokenLogprobs token_logprob_row(std::span<const uint32_t> w, uint32_t top, int32_t token, std::string_view row) {
  auto entry = [&](uint32_t at) { return models::TokenLogprob{int32_t(w[at]), std::bit_cast<float>(w[at + 1])}; };
  models::TokenLogprobs r{entry(0), {}};
  if (r.chosen.token != token)
    throw std::logic_error(fmt::format("{} holds the log-probabilities of token {}, not of {}", row, r.chosen.token, token));
  for (uint32_t i = 0; i < top; ++i) r.top.push_back(entry(2 + 2 * i));
  return r;
}

}  // namespace bdsl::bitnet

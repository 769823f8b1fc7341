// An error a client caused (or a server state it must wait out), as OpenAI reports it:
// HTTP status plus {"error": {"message", "type", "param", "code"}}.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <stdexcept>
#include <string>

namespace bdsl::serve {

struct ApiError : std::runtime_error {
  ApiError(int http_status, std::string message, std::optional<std::string> field = std::nullopt,
           std::string error_code = "invalid_value", std::string error_type = "invalid_request_error")
      : std::runtime_error(std::move(message)),
        status(http_status),
        param(std::move(field)),
        code(std::move(error_code)),
        type(std::move(error_type)) {}

  nlohmann::json to_json() const {
    return {{"error",
             {{"message", what()},
              {"type", type},
              {"param", param ? nlohmann::json(*param) : nlohmann::json(nullptr)},
              {"code", code}}}};
  }

  int status;
  std::optional<std::string> param;  // the request field at fault
  std::string code;
  std::string type;
};

// 400 for a field of the request body.
inline ApiError bad_field(const std::string& param, const std::string& message,
                          const std::string& code = "invalid_value") {
  return ApiError(400, message, param, code);
}

// 404 for a model name this server does not run.
inline ApiError model_not_found(const std::string& asked, const std::string& served) {
  return ApiError(404, "the model '" + asked + "' does not exist; this server runs '" + served + "'", "model", "model_not_found");
}

// 500: the server failed, not the request.
inline ApiError server_error(const std::string& message, const std::string& code) {
  return ApiError(500, message, std::nullopt, code, "server_error");
}

}  // namespace bdsl::serve

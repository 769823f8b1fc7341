// The OpenAI-compatible HTTP server (cpp-httplib) over a Scheduler:
//   POST /v1/chat/completions, POST /v1/completions   (JSON, or server-sent events with "stream")
//   GET /v1/models, /v1/models/{id}, /health, /metrics (Prometheus text)
//   POST /tokenize, POST /detokenize                   (llama-server's; serve/token_endpoints.h)
// Every handler answers bad input with a 4xx and OpenAI's error object, and the server keeps
// serving; a full queue is a 503 with Retry-After. stop() drains: new requests get 503, running
// ones end (streams get an error event and [DONE]), then the listening socket closes.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "models/tokenizer/tokenizer.h"
#include "serve/openai_request.h"
#include "serve/scheduler.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace bdsl::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;         // 0: any free port (bind() returns it)
  std::string model_name;  // the id of the one model served
  uint32_t candidates = 0; // top-k candidates the decoder returns (0: greedy only)
};

class Server {
 public:
  Server(Scheduler& scheduler, const models::Tokenizer& tokenizer, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the address; returns the port. Throws std::runtime_error when it cannot.
  int bind();
  // Serves until stop(); returns false if the server failed.
  bool serve();
  // Graceful stop, from any thread: refuse new requests, end the running ones, wait up to
  // `drain` for their answers to go out, then close the socket (serve() returns).
  void stop(std::chrono::milliseconds drain = std::chrono::seconds(3));

 private:
  void routes();
  void completion(const httplib::Request& req, httplib::Response& res, bool chat);
  std::vector<std::vector<int32_t>> encode_prompts(const CompletionParams& p) const;  // each prompt's ids

  Scheduler& scheduler_;
  const models::Tokenizer& tokenizer_;
  ServerOptions options_;
  ServedModel model_;
  std::unique_ptr<httplib::Server> http_;
  int listen_socket_ = -1;  // the bound socket (its backlog is raised in bind())
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  const int64_t created_;  // unix time of the start, for /v1/models
  std::atomic<bool> draining_{false};
  std::atomic<uint32_t> in_flight_{0};  // completion requests not yet fully answered
  std::atomic<uint64_t> next_id_{0};
};

}  // namespace bdsl::serve

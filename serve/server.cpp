#include "serve/server.h"

#include <httplib.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "models/tokenizer/chat_template.h"
#include "serve/answer.h"
#include "serve/api_error.h"
#include "serve/metrics.h"
#include "serve/openai_response.h"
#include "serve/peer_watch.h"
#include "serve/token_endpoints.h"

namespace bdsl::serve {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr size_t kMaxBodyBytes = 8 << 20;
constexpr uint32_t kMaxHttpThreads = 1024;
constexpr auto kStreamPoll = 250ms;       // how long a stream waits for text before looking again
constexpr auto kKeepAliveAfter = 1000ms;  // an SSE comment after this much silence finds closed clients

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  if (e.status == 503) res.set_header("Retry-After", "1");
  send_json(res, e.status, e.to_json());
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Server::Server(Scheduler& scheduler, const models::Tokenizer& tokenizer, ServerOptions options)
    : scheduler_(scheduler),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      model_{options_.model_name, scheduler.context_length(), options_.candidates, scheduler.max_top_logprobs()},
      http_(std::make_unique<httplib::Server>()),
      created_(unix_now()) {
  // A thread per connection that may be waiting or streaming at once, with room to spare for
  // /health and /metrics. Past the cap, connections wait in httplib's queue before being read.
  const SchedulerStats s = scheduler_.stats();
  const uint32_t threads = std::clamp<uint32_t>(s.slots + s.queue_capacity + 8, 32, kMaxHttpThreads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // One request per connection. An idle keep-alive connection holds a worker thread, and a
  // stop waits for it to time out; a client (the openai package keeps idle sockets 4 s) may also
  // reuse a socket the server is just closing. A loopback or LAN connect costs nothing next to
  // generating a completion.
  http_->set_keep_alive_max_count(1);
  http_->set_payload_max_length(kMaxBodyBytes);
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, with which a second server
  // binds the same port and the kernel splits connections between the two.
  http_->set_socket_options([this](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_socket_ = sock;
  });
  routes();
}

Server::~Server() = default;

int Server::bind() {
  const int port = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                                      : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0)
    throw std::runtime_error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                             " (in use, or not an address of this machine)");
  // Debian's cpp-httplib 0.11 listens with a backlog of 5: a burst of clients connecting at once
  // (64 streams starting together) overflows it and some connections are reset before their
  // request is read. Listening again on the bound socket only raises the backlog.
  if (listen_socket_ >= 0 && ::listen(listen_socket_, SOMAXCONN) != 0)
    throw std::runtime_error("cannot raise the listen backlog on " + options_.host + ":" + std::to_string(port));
  return port;
}

bool Server::serve() { return http_->listen_after_bind(); }

void Server::stop(std::chrono::milliseconds drain) {
  draining_ = true;
  scheduler_.shutdown();  // every running request ends now; their handlers write the end
  const auto deadline = std::chrono::steady_clock::now() + drain;
  while (in_flight_ > 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  http_->stop();
}

std::vector<std::vector<int32_t>> Server::encode_prompts(const CompletionParams& p) const {
  if (p.chat) return {tokenizer_.encode(tokenizer_.chat_prompt(p.messages, true), false)};
  std::vector<std::vector<int32_t>> out;
  for (const auto& prompt : p.prompts)
    out.push_back(prompt.tokens.empty() ? tokenizer_.encode(prompt.text, true) : prompt.tokens);  // ids as given
  return out;
}

void Server::routes() {
  http_->Post("/v1/chat/completions", [this](const auto& req, auto& res) { completion(req, res, true); });
  http_->Post("/v1/completions", [this](const auto& req, auto& res) { completion(req, res, false); });
  http_->Get("/v1/models", [this](const auto&, auto& res) { send_json(res, 200, models_json(model_.name, created_)); });
  http_->Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != model_.name) return send_error(res, model_not_found(id, model_.name));
    send_json(res, 200, models_json(model_.name, created_)["data"][0]);
  });
  // The tokenizer's endpoints (llama-server's): answered at once, never queued.
  auto tokens_route = [this](json (*answer)(std::string_view, const models::Tokenizer&)) {
    return [this, answer](const httplib::Request& req, httplib::Response& res) {
      try {
        send_json(res, 200, answer(req.body, tokenizer_));
      } catch (const ApiError& e) {
        send_error(res, e);
      }
    };
  };
  http_->Post("/tokenize", tokens_route(tokenize_answer));
  http_->Post("/detokenize", tokens_route(detokenize_answer));
  http_->Get("/health", [this](const auto&, auto& res) {
    const auto s = scheduler_.stats();
    send_json(res, draining_ ? 503 : 200,
              {{"status", draining_ ? "shutting down" : "ok"}, {"slots", s.slots}, {"active_slots", s.active_slots},
               {"queue_length", s.queue_length}});
  });
  http_->Get("/metrics", [this](const auto&, auto& res) {
    const double uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    res.set_content(prometheus_text(scheduler_.stats(), uptime), "text/plain; version=0.0.4");
  });
  // Unknown paths and httplib's own refusals (a body too large, ...) in OpenAI's shape too.
  http_->set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string message = res.status == 404 ? "no endpoint " + req.method + " " + req.path
                                                  : "the request was refused (HTTP " + std::to_string(res.status) + ")";
    const int status = res.status;
    send_json(res, status, ApiError(status, message, std::nullopt, status == 404 ? "unknown_url" : "invalid_request").to_json());
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    send_error(res, server_error(message, "internal_error"));
  });
}

void Server::completion(const httplib::Request& req, httplib::Response& res, bool chat) {
  ++in_flight_;
  bool streaming = false;  // a stream's provider takes over in_flight_ until it ends
  try {
    if (draining_) throw unfinished(FinishReason::Shutdown);
    const CompletionParams p = chat ? parse_chat_request(req.body, model_) : parse_completion_request(req.body, model_);
    const std::vector<std::vector<int32_t>> prompts = encode_prompts(p);
    const uint32_t context = scheduler_.context_length();
    const char* prompt_field = chat ? "messages" : "prompt";
    for (size_t i = 0; i < prompts.size(); ++i)
      if (prompts[i].size() >= context)
        throw bad_field(prompt_field,
                        std::string(prompts.size() > 1 ? "prompt[" + std::to_string(i) + "]" : "the prompt") + " is " +
                            std::to_string(prompts[i].size()) + " tokens; this model's context is " +
                            std::to_string(context) + " tokens (prompt and completion together)",
                        "context_length_exceeded");
    const size_t choices = prompts.size() * p.n;
    if (choices > scheduler_.queue_capacity())
      throw bad_field(p.n > 1 ? "n" : prompt_field,
                      std::to_string(choices) + " choices asked (" + std::to_string(prompts.size()) + " prompts x n = " +
                          std::to_string(p.n) + "); this server queues at most " +
                          std::to_string(scheduler_.queue_capacity()) + " at once");

    // One generation per choice: prompt k / n's (k % n)-th, its seed the request's plus k % n
    // (choice 0 is what the same request with n = 1 gives).
    auto channel = std::make_shared<TextChannel>(choices);
    std::vector<GenerationRequest> generations;
    for (size_t k = 0; k < choices; ++k) {
      GenerationRequest g;
      g.prompt = prompts[k / p.n];
      g.sampling = p.sampling;
      g.sampling.seed += k % p.n;
      g.max_tokens = p.max_tokens ? p.max_tokens : context - uint32_t(g.prompt.size());
      g.stop = p.stop;
      g.logprobs = p.logprobs;
      g.prompt_logprobs = p.echo && p.logprobs >= 0;
      g.on_text = [channel, k](std::string_view text) { channel->push(k, text); };
      g.on_logprobs = [channel, k](const models::TokenLogprobs& lp) { channel->push(k, lp); };
      g.on_finish = [channel, k](FinishReason r, const Usage& u) { channel->finish(k, r, u); };
      generations.push_back(std::move(g));
    }
    std::vector<std::shared_ptr<Scheduler::Ticket>> tickets;
    try {
      tickets = scheduler_.submit_group(std::move(generations));
    } catch (const QueueFull& e) {
      throw ApiError(503, std::string(e.what()) + ": try again shortly", std::nullopt, "queue_full", "server_error");
    } catch (const ShuttingDown&) {
      throw unfinished(FinishReason::Shutdown);
    } catch (const std::invalid_argument& e) {
      throw ApiError(400, e.what());
    } catch (const std::length_error& e) {
      throw bad_field(prompt_field, e.what(), "context_length_exceeded");
    }
    auto cancel_all = [tickets] {
      for (const auto& t : tickets) t->cancel();
    };

    AnswerShape shape{{chat, (chat ? "chatcmpl-" : "cmpl-") + std::to_string(created_) + "-" + std::to_string(next_id_++),
                       unix_now(), model_.name},
                      p.n, p.logprobs >= 0, p.include_usage, {}, {}};
    if (p.echo)  // each prompt's text as given (ids: their text), and its first token
      for (size_t i = 0; i < prompts.size(); ++i) {
        shape.echo_text.push_back(p.prompts[i].tokens.empty() ? p.prompts[i].text : tokenizer_.decode(prompts[i], false));
        shape.echo_first.push_back(prompts[i][0]);
      }
    if (!p.stream) {
      // The whole answer, unless the client goes away first: then its slots are freed at once. The
      // socket is looked for only once an answer takes longer than a poll.
      std::optional<PeerWatch> peer;
      std::optional<std::vector<TextChannel::Taken>> t;
      while (!(t = channel->take_all(kStreamPoll))) {
        if (channel->failed()) cancel_all();  // the answer is an error now: its other choices stop
        if (!peer) peer.emplace(req.remote_addr, req.remote_port, req.local_port);
        if (peer->gone()) {
          cancel_all();
          t = channel->take_all();  // the scheduler ends them at its next turn
          break;
        }
      }
      send_json(res, 200, whole_answer(shape, tokenizer_, *t));
    } else {
      auto stream = std::make_shared<AnswerStream>(std::move(shape), tokenizer_, channel);
      auto last_write = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [stream, last_write](size_t, httplib::DataSink& sink) {
            std::string out = stream->next(kStreamPoll);
            const auto now = std::chrono::steady_clock::now();
            if (out.empty() && now - *last_write >= kKeepAliveAfter) out = ": keep-alive\n\n";
            if (!out.empty()) {
              if (!sink.write(out.data(), out.size())) return false;  // the client went away
              *last_write = now;
            }
            if (stream->done()) sink.done();
            return true;
          },
          // Whatever ended the response: choices still running are not read by anyone (the
          // client went away, or another choice failed).
          [this, cancel_all](bool) {
            cancel_all();
            --in_flight_;
          });
      streaming = true;
    }
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const std::exception& e) {
    send_error(res, server_error(e.what(), "internal_error"));
  }
  if (!streaming) --in_flight_;
}

}  // namespace bdsl::serve

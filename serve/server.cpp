#include "serve/server.h"

#include <httplib.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "models/tokenizer/chat_template.h"
#include "serve/api_error.h"
#include "serve/metrics.h"
#include "serve/openai_response.h"
#include "serve/peer_watch.h"
#include "serve/text_channel.h"

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

ApiError server_error(const std::string& message, const std::string& code) {
  return ApiError(500, message, std::nullopt, code, "server_error");
}

// The ends that are not an answer, as the error a client gets (HTTP status, or an SSE error event).
ApiError unfinished(FinishReason r) {
  if (r == FinishReason::Cancelled)  // nobody reads it: the client is gone
    return ApiError(499, "the client closed the connection", std::nullopt, "client_closed", "invalid_request_error");
  if (r == FinishReason::Shutdown)
    return ApiError(503, "the server is shutting down", std::nullopt, "shutting_down", "server_error");
  return server_error("generation failed on the device", "generation_failed");
}

bool is_answer(FinishReason r) { return r == FinishReason::Stop || r == FinishReason::Length; }

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A token as an answer lists it (its logprob and alternatives filled in by the caller).
TokenLogprobText token_text(const models::Tokenizer& tokenizer, int32_t id) {
  const int32_t one[] = {id};
  return {std::string(tokenizer.token_bytes(id)), std::nullopt, {}, tokenizer.decode(one, false).size()};
}

// Tokens' log-probabilities with their text, for the answer; `first`: a prompt's first token
// before them (unscored).
std::vector<TokenLogprobText> logprob_texts(const models::Tokenizer& tokenizer, const std::vector<models::TokenLogprobs>& v,
                                            std::optional<int32_t> first = std::nullopt) {
  std::vector<TokenLogprobText> out;
  if (first) out.push_back(token_text(tokenizer, *first));
  for (const auto& lp : v) {
    TokenLogprobText t = token_text(tokenizer, lp.chosen.token);
    t.logprob = lp.chosen.logprob;
    for (const auto& a : lp.top) t.top.emplace_back(std::string(tokenizer.token_bytes(a.token)), a.logprob);
    out.push_back(std::move(t));
  }
  return out;
}

// A choice's logprobs: null where the request asked for none. `offset`: the completions' text
// offset so far (moved on); `first`: as logprob_texts'.
json logprobs_json(const models::Tokenizer& tokenizer, bool asked, bool chat, const std::vector<models::TokenLogprobs>& v,
                   size_t& offset, std::optional<int32_t> first = std::nullopt) {
  if (!asked) return nullptr;
  const auto texts = logprob_texts(tokenizer, v, first);
  return chat ? chat_logprobs_json(texts) : completion_logprobs_json(texts, offset);
}

// A streamed answer between calls of httplib's content provider.
struct Stream {
  std::shared_ptr<TextChannel> channel;
  std::shared_ptr<Scheduler::Ticket> ticket;
  ResponseHeader header;
  bool include_usage = false;
  const models::Tokenizer* tokenizer = nullptr;
  bool logprobs = false;  // asked for
  size_t text_offset = 0;
  bool started = false;
  bool done = false;
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();

  // The next piece of the event stream ("" when nothing new yet). Log-probabilities go with the
  // text that arrived with them (a token's text may come a chunk later: a stop string's start or
  // an unfinished character is held back).
  std::string next() {
    std::string out;
    if (!started && header.chat) out += sse_event(chunk_json(header, "", std::nullopt, true));
    started = true;
    const auto t = channel->take(kStreamPoll);
    if (!t.text.empty() || !t.logprobs.empty())
      out += sse_event(chunk_json(header, t.text, std::nullopt, false,
                                  logprobs_json(*tokenizer, logprobs, header.chat, t.logprobs, text_offset)));
    if (!t.end) return out;
    if (is_answer(*t.end)) {
      out += sse_event(chunk_json(header, "", *t.end));
      if (include_usage) out += sse_event(usage_chunk_json(header, t.usage));
    } else {
      out += sse_event(unfinished(*t.end).to_json());
    }
    done = true;
    return out + kSseDone;
  }
};

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

std::vector<int32_t> Server::encode_prompt(const CompletionParams& p) const {
  if (!p.prompt_tokens.empty()) return p.prompt_tokens;  // the client's ids, as given
  if (!p.chat) return tokenizer_.encode(p.prompt, true);
  return tokenizer_.encode(tokenizer_.chat_prompt(p.messages, true), false);
}

void Server::routes() {
  http_->Post("/v1/chat/completions", [this](const auto& req, auto& res) { completion(req, res, true); });
  http_->Post("/v1/completions", [this](const auto& req, auto& res) { completion(req, res, false); });
  http_->Get("/v1/models", [this](const auto&, auto& res) { send_json(res, 200, models_json(model_.name, created_)); });
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
    GenerationRequest g;
    g.prompt = encode_prompt(p);
    const uint32_t context = scheduler_.context_length();
    if (g.prompt.size() >= context)
      throw bad_field(chat ? "messages" : "prompt",
                      "the prompt is " + std::to_string(g.prompt.size()) + " tokens; this model's context is " +
                          std::to_string(context) + " tokens (prompt and completion together)",
                      "context_length_exceeded");
    g.sampling = p.sampling;
    g.max_tokens = p.max_tokens ? p.max_tokens : context - uint32_t(g.prompt.size());
    g.stop = p.stop;
    g.logprobs = p.logprobs;
    g.prompt_logprobs = p.echo && p.logprobs >= 0;
    const std::vector<int32_t> prompt = g.prompt;
    auto channel = std::make_shared<TextChannel>();
    g.on_text = [channel](std::string_view text) { channel->push(text); };
    g.on_logprobs = [channel](const models::TokenLogprobs& lp) { channel->push(lp); };
    g.on_finish = [channel](FinishReason r, const Usage& u) { channel->finish(r, u); };

    std::shared_ptr<Scheduler::Ticket> ticket;
    try {
      ticket = scheduler_.submit(std::move(g));
    } catch (const QueueFull& e) {
      throw ApiError(503, std::string(e.what()) + ": try again shortly", std::nullopt, "queue_full", "server_error");
    } catch (const ShuttingDown&) {
      throw unfinished(FinishReason::Shutdown);
    } catch (const std::invalid_argument& e) {
      throw ApiError(400, e.what());
    } catch (const std::length_error& e) {
      throw bad_field(chat ? "messages" : "prompt", e.what(), "context_length_exceeded");
    }
    const ResponseHeader header{chat, (chat ? "chatcmpl-" : "cmpl-") + std::to_string(created_) + "-" +
                                          std::to_string(next_id_++), unix_now(), model_.name};
    if (!p.stream) {
      // The whole answer, unless the client goes away first: then its slot is freed at once. The
      // socket is looked for only once an answer takes longer than a poll.
      std::optional<PeerWatch> peer;
      std::optional<TextChannel::Taken> t;
      while (!(t = channel->take_all(kStreamPoll))) {
        if (!peer) peer.emplace(req.remote_addr, req.remote_port, req.local_port);
        if (peer->gone()) {
          ticket->cancel();
          t = channel->take_all();  // the scheduler ends it at its next turn
          break;
        }
      }
      if (!is_answer(*t->end)) throw unfinished(*t->end);
      size_t offset = 0;
      // With echo: the prompt's text first, and its tokens' log-probabilities (its first token's null).
      const std::string text = p.echo ? (p.prompt_tokens.empty() ? p.prompt : tokenizer_.decode(p.prompt_tokens, false)) + t->text
                                      : t->text;
      const json logprobs = logprobs_json(tokenizer_, p.logprobs >= 0, chat, t->logprobs, offset,
                                          p.echo ? std::optional<int32_t>(prompt[0]) : std::nullopt);
      send_json(res, 200, completion_json(header, text, *t->end, t->usage, logprobs));
    } else {
      auto stream = std::make_shared<Stream>(Stream{channel, ticket, header, p.include_usage, &tokenizer_, p.logprobs >= 0});
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [stream](size_t, httplib::DataSink& sink) {
            std::string out = stream->next();
            const auto now = std::chrono::steady_clock::now();
            if (out.empty() && now - stream->last_write >= kKeepAliveAfter) out = ": keep-alive\n\n";
            if (!out.empty()) {
              if (!sink.write(out.data(), out.size())) return false;  // the client went away
              stream->last_write = now;
            }
            if (stream->done) sink.done();
            return true;
          },
          // Whatever ended the response: if the answer was not complete, the client went away.
          [this, stream](bool) {
            if (!stream->done) stream->ticket->cancel();
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

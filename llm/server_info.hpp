#pragma once
// What a model server says about its context window, read from the endpoints where
// servers say it, so that a prompt that does not fit is cut (or refused) before it is
// sent rather than answered with an HTTP 400 — or, on Ollama, silently cut by the
// server. Pure parsers of the bodies; llm_client does the GETs.
//
//   vLLM:        GET {base}/models → {"data": [{"id": MODEL, "max_model_len": N, …}]}
//   llama.cpp:   GET {origin}/props → {"default_generation_settings": {"n_ctx": N, …}}
//                (its /v1/models gives meta.n_ctx_train, the *training* length, which
//                is not the window the server was started with: not used)
//   Anthropic:   every current Claude model has a 200000-token window (the API does
//                not report it); the 1M-token beta needs a header this client does
//                not send
//   OpenAI, Ollama: no endpoint says it — set coder.llm.context_tokens (Ollama: the
//                OLLAMA_CONTEXT_LENGTH the server runs with; its default is small)

#include <cstdint>
#include <optional>
#include <string>

namespace ks {

// max_model_len of `model` in a /v1/models body (by id, or by root — the served
// model's path — or the only entry when there is one). nullopt when none says it.
std::optional<int64_t> context_from_models(const std::string& body, const std::string& model);

// n_ctx in a llama.cpp /props body (default_generation_settings.n_ctx, or a top-level
// n_ctx). nullopt when absent.
std::optional<int64_t> context_from_props(const std::string& body);

// The window a provider's model is known to have without asking: 200000 for
// Anthropic's claude-* models; nullopt otherwise.
std::optional<int64_t> known_context(const std::string& provider, const std::string& model);

}  // namespace ks

// Development switches read from the environment (each caller keeps the value in a function-local
// static: read once per process). Host only; no CUDA or torch headers.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace vlattn {

// An integer switch: `fallback` when unset or empty, else the value as atoll reads it.
inline int64_t env_int(const char* name, int64_t fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || env[0] == '\0') return fallback;
  return static_cast<int64_t>(std::atoll(env));
}

// An on/off switch: `fallback` when unset or empty, off when it starts with '0', else on.
inline bool env_flag(const char* name, bool fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || env[0] == '\0') return fallback;
  return env[0] != '0';
}

}  // namespace vlattn

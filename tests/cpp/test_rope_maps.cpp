// Host unit tests for csrc/kernels/rope.h (RoPE channel maps) and csrc/kernels/gemm_config.h
// (config legality). Driven by tests/test_cpp.py: `--list` prints case names, `NAME` runs one.
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/gemm_config.h"
#include "kernels/rope.h"

using namespace vlattn;

namespace {

struct Case {
  const char* name;
  std::function<bool(std::string&)> fn;
};

#define EXPECT(cond)                                                        \
  do {                                                                      \
    if (!(cond)) {                                                          \
      err = std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " #cond; \
      return false;                                                         \
    }                                                                       \
  } while (0)

// Seed 007 split: channels [0,32) plane 0, [32,80) plane 1, [80,128) plane 2.
bool mrope_seed_split(std::string& err) {
  const int s[] = {32, 48, 48};
  for (int c = 0; c < 128; ++c) EXPECT(rope::mrope_plane(c, s, 3) == (c < 32 ? 0 : c < 80 ? 1 : 2));
  EXPECT(rope::mrope_plane(128, s, 3) == -1);
  EXPECT(rope::mrope_plane(-1, s, 3) == -1);
  return true;
}

// HF Qwen2.5-VL split [16,24,24] doubled: the plane pattern repeats on the second half, so a
// channel and its rotate-half partner (c +- 64) always read the same plane.
bool mrope_hf_split_pairs_share_plane(std::string& err) {
  const int s[] = {16, 24, 24, 16, 24, 24};
  for (int c = 0; c < 64; ++c) {
    EXPECT(rope::mrope_plane(c, s, 6) == rope::mrope_plane(c + 64, s, 6));
    EXPECT(rope::mrope_plane(c, s, 6) == (c < 16 ? 0 : c < 40 ? 1 : 2));
  }
  return true;
}

bool rotate_half_full_head(std::string& err) {
  for (int c = 0; c < 128; ++c) {
    rope::Pair p = rope::rotate_half_pair(c, 0, 128);
    EXPECT(p.partner == (c < 64 ? c + 64 : c - 64));
    EXPECT(p.sign == (c < 64 ? -1 : 1));
    EXPECT(p.freq == c % 64);
    // Involution: the partner's partner is c, with the opposite sign.
    rope::Pair q = rope::rotate_half_pair(p.partner, 0, 128);
    EXPECT(q.partner == c && q.sign == -p.sign && q.freq == p.freq);
  }
  return true;
}

// 034 K: pairs (j, j+21) in t, (42+j, 63+j) in h, (84+j, 106+j) in w, as DESIGN.md lists them.
bool thw_segments_seed_pairs(std::string& err) {
  const int split[] = {42, 42, 44};
  for (int c = 0; c < 128; ++c) {
    rope::Segment s = rope::thw_segment(c, split);
    EXPECT(s.index == (c < 42 ? 0 : c < 84 ? 1 : 2));
    rope::Pair p = rope::rotate_half_pair(c, s.base, s.width);
    rope::Segment ps = rope::thw_segment(p.partner, split);
    EXPECT(ps.index == s.index);  // rotation never crosses a segment
  }
  EXPECT(rope::rotate_half_pair(0, 0, 42).partner == 21);
  EXPECT(rope::rotate_half_pair(42, 42, 42).partner == 63);
  EXPECT(rope::rotate_half_pair(84, 84, 44).partner == 106);
  EXPECT(rope::rotate_half_pair(127, 84, 44).partner == 105);
  EXPECT(rope::rotate_half_pair(127, 84, 44).freq == 21);
  EXPECT(rope::thw_segment(128, split).index == -1);
  return true;
}

// Legal configs compile (their static_asserts hold); the illegal ones are compile-fail cases in
// tests/test_cpp.py. Values are read back to keep the instantiations alive.
bool gemm_configs_legal(std::string& err) {
  using Coop = Sm90GemmConfig<128, 128, 64, 1, 1, Schedule::kCooperative, TileSched::kPersistent, 0>;
  using Wide = Sm90GemmConfig<128, 256, 64, 1, 1, Schedule::kCooperative, TileSched::kPersistent, 0>;
  using Ping = Sm90GemmConfig<64, 128, 64, 1, 1, Schedule::kPingpong, TileSched::kPersistent, 0>;
  using SK = Sm90GemmConfig<128, 128, 64, 1, 1, Schedule::kCooperative, TileSched::kStreamK, 4>;
  EXPECT(Coop::kSmemBytesPerStage == 32768);
  EXPECT(Wide::kSmemBytesPerStage == 49152);
  EXPECT(Ping::kTileM == 64 && SK::kStages == 4);
  return true;
}

const Case kCases[] = {
    {"mrope_seed_split", mrope_seed_split},
    {"mrope_hf_split_pairs_share_plane", mrope_hf_split_pairs_share_plane},
    {"rotate_half_full_head", rotate_half_full_head},
    {"thw_segments_seed_pairs", thw_segments_seed_pairs},
    {"gemm_configs_legal", gemm_configs_legal},
};

}  // namespace

#ifdef VLATTN_ILLEGAL_CONFIG
// Compile-fail probes: tests/test_cpp.py defines one of these and expects the static_assert text.
#if VLATTN_ILLEGAL_CONFIG == 1
template struct vlattn::Sm90GemmConfig<64, 128, 64, 1, 1, Schedule::kCooperative, TileSched::kPersistent, 0>;
#elif VLATTN_ILLEGAL_CONFIG == 2
template struct vlattn::Sm90GemmConfig<64, 128, 64, 1, 1, Schedule::kPingpong, TileSched::kStreamK, 0>;
#elif VLATTN_ILLEGAL_CONFIG == 3
template struct vlattn::Sm90GemmConfig<128, 256, 128, 1, 1, Schedule::kCooperative, TileSched::kPersistent, 3>;
#elif VLATTN_ILLEGAL_CONFIG == 4
template struct vlattn::Sm90GemmConfig<128, 100, 64, 1, 1, Schedule::kCooperative, TileSched::kPersistent, 0>;
#endif
#endif

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const Case& c : kCases) std::printf("%s\n", c.name);
    return 0;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s --list | CASE\n", argv[0]);
    return 2;
  }
  for (const Case& c : kCases) {
    if (std::strcmp(argv[1], c.name) == 0) {
      std::string err;
      if (c.fn(err)) return 0;
      std::fprintf(stderr, "FAILED %s: %s\n", c.name, err.c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "unknown case %s\n", argv[1]);
  return 2;
}

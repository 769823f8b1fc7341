// Stop strings at the text level: what may start a stop string is held back, the stop string
// and what follows are dropped, and every other byte comes out once, in order.
#include <gtest/gtest.h>

#include "serve/stop_matcher.h"

namespace bdsl::serve {
namespace {

// Pushes pieces one by one; returns what came out and whether a stop string ended it.
std::pair<std::string, bool> run(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) {
    auto r = m.push(p);
    out += r.text;
    if (r.stopped) return {out, true};
  }
  return {out + m.flush(), false};
}

TEST(StopMatcher, HoldsBackWhatCouldStartAStopString) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("abc E").text, "abc ");
  EXPECT_EQ(m.push("N").text, "");
  auto r = m.push("D tail");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");  // the stop string and what follows it are not returned
}

TEST(StopMatcher, ReleasesHeldTextWhenItTurnsOutNotToBeAStop) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("xE").text, "x");
  EXPECT_EQ(m.push("Nx").text, "ENx");
  EXPECT_EQ(m.push("EN").text, "");
  EXPECT_EQ(m.flush(), "EN");  // generation ended without the stop string: the tail goes out
}

TEST(StopMatcher, AStopSplitOverManyPieces) {
  StopMatcher m({"<|stop|>"});
  EXPECT_EQ(run(m, {"hello <", "|", "st", "op|", "> never"}), std::make_pair(std::string("hello "), true));
}

TEST(StopMatcher, TheEarliestOfSeveralStopsWins) {
  StopMatcher m({"world", "lo w", "zzz"});
  EXPECT_EQ(run(m, {"hello world"}), std::make_pair(std::string("hel"), true));
}

TEST(StopMatcher, NoStopsPassesEverythingAtOnce) {
  StopMatcher m({});
  EXPECT_EQ(m.push("any text").text, "any text");
  StopMatcher empty({""});  // an empty stop string would match everywhere: ignored
  EXPECT_EQ(empty.push("abc").text, "abc");
}

TEST(StopMatcher, MultiByteCharactersAreNeverSplit) {
  StopMatcher m({"é!"});
  EXPECT_EQ(m.push("café").text, "caf");  // "é" may start "é!": held whole
  EXPECT_EQ(m.push("?").text, "é?");
}

}  // namespace
}  // namespace bdsl::serve

#include "quantize/guard_ranking.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <random>
#include <vector>

using namespace qtool::quantize;

// Additive costs (independent noise powers): a group costs the sum of its units. The best-first ranking must list
// units in the order a full scan's stable sort gives, and list the first few with far fewer evaluations than units.
TEST_CASE("guard ranking: additive costs are listed in full-scan order with few evaluations") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  const size_t n = 510;
  std::vector<double> alone(n);
  for (auto& c : alone) c = std::pow(u(rng), 8);  // a few costly units, a long cheap tail
  alone[17] = alone[300] = 0.25;                  // a tie: the lower unit first
  std::vector<size_t> scan(n);
  std::iota(scan.begin(), scan.end(), 0);
  std::stable_sort(scan.begin(), scan.end(), [&](size_t a, size_t b) { return alone[a] > alone[b]; });

  int64_t calls = 0;
  BestFirstRanking ranking(n, [&](size_t begin, size_t end) {
    ++calls;
    return std::accumulate(alone.begin() + begin, alone.begin() + end, 0.0);
  });
  for (size_t k = 0; k < 8; ++k) {
    const auto next = ranking.next();
    REQUIRE(next);
    CHECK(*next == scan[k]);
  }
  CHECK(ranking.evaluations() == calls);
  CHECK(calls < int64_t(n));  // fewer than a full scan, which measures all n units alone
  // Listing everything yields every unit once, in scan order.
  std::vector<size_t> rest;
  while (const auto next = ranking.next()) rest.push_back(*next);
  CHECK(std::equal(rest.begin(), rest.end(), scan.begin() + 8, scan.end()));
}

TEST_CASE("guard ranking: a single unit is measured alone: stop ends the listing before an evaluation") {
  int64_t calls = 0;
  BestFirstRanking one(1, [&](size_t, size_t) { return ++calls, 1.0; });
  CHECK(one.next() == std::optional<size_t>(0));
  CHECK(calls == 1);
  CHECK_FALSE(one.next());

  BestFirstRanking many(64, [](size_t begin, size_t end) { return double(end - begin); });
  CHECK_FALSE(many.next([] { return true; }));
  CHECK(many.evaluations() == 0);
  // Stopped halfway, the listing resumes where it was.
  int stops = 0;
  auto every_third = [&] { return ++stops % 3 == 0; };
  std::vector<size_t> got;
  for (int tries = 0; tries < 1000 && got.size() < 64; ++tries)
    if (const auto k = many.next(every_third)) got.push_back(*k);
  std::sort(got.begin(), got.end());
  CHECK(got.size() == 64);
  CHECK(std::adjacent_find(got.begin(), got.end()) == got.end());
}

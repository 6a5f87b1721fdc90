#include "quantize/guard_ranking.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace qtool::quantize {
namespace {

// Heap order: the costliest group on top; on equal cost, the lower first unit.
bool below(const auto& a, const auto& b) { return a.cost < b.cost || (a.cost == b.cost && a.begin > b.begin); }

}  // namespace

BestFirstRanking::BestFirstRanking(size_t units, Cost cost) : cost_(std::move(cost)) {
  // The root is split before anything is measured: its cost is the fully quantized model's, known to miss.
  if (units > 0) push({0, units, std::numeric_limits<double>::infinity(), false});
}

void BestFirstRanking::push(Group g) {
  heap_.push_back(g);
  std::push_heap(heap_.begin(), heap_.end(), [](const Group& a, const Group& b) { return below(a, b); });
}

BestFirstRanking::Group BestFirstRanking::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), [](const Group& a, const Group& b) { return below(a, b); });
  Group g = heap_.back();
  heap_.pop_back();
  return g;
}

std::optional<size_t> BestFirstRanking::next(const std::function<bool()>& stop) {
  auto measure = [&](size_t begin, size_t end) {
    ++evaluations_;
    return Group{begin, end, cost_(begin, end), true};
  };
  while (!heap_.empty()) {
    if (heap_.front().end - heap_.front().begin == 1 && heap_.front().measured) return pop().begin;
    if (stop && stop()) return std::nullopt;
    const Group g = pop();
    if (g.end - g.begin == 1) {  // a root of one unit: measured alone, then listed
      push(measure(g.begin, g.end));
      continue;
    }
    const size_t mid = g.begin + (g.end - g.begin) / 2;
    push(measure(g.begin, mid));
    if (stop && stop()) {  // keep the other half listable
      push({mid, g.end, g.cost, false});
      return std::nullopt;
    }
    push(measure(mid, g.end));
  }
  return std::nullopt;
}

}  // namespace qtool::quantize

// Best-first ranking of the accuracy guard's units (quantize/accuracy_guard.h, step 1) by their cost alone, without
// measuring every unit alone.
//
// What it minimises: the evaluations (quantized models run over the samples) needed to list units in decreasing
// order of c(i), the score of the model with only unit i quantized. The guard sends back only the first few of
// that list, so measuring all n units alone (n evaluations: 510 on ppocrv4-det) is mostly wasted.
//
// Assumption: a group's cost is at least each member's. Quantization noise of different units is independent, and
// independent noise powers add: noise(G) = sum over i in G of noise(i) >= max noise(i). KL and top-1 flips grow
// with the noise in the same way.
//
// Groups are contiguous ranges of units (rewrite order: neighbours in the graph). A group is measured with only its
// units quantized, everything else float. The costliest group is taken first: a group of one unit is the next unit
// of the ranking (no group left can hold a costlier unit, by the assumption); a larger one is split in halves and
// both are measured. Ties: the group starting at the lower unit first (the order a full scan's stable sort gives).
// Cost: about 2 log2(n) evaluations per unit listed; where the assumption holds the list is the full scan's order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace qtool::quantize {

class BestFirstRanking {
 public:
  // cost(begin, end): the score of the model with only units [begin, end) quantized (end - begin == 1: the unit
  // alone; the caller keeps what it needs about it from that call).
  using Cost = std::function<double(size_t begin, size_t end)>;
  BestFirstRanking(size_t units, Cost cost);

  // The next unit of the ranking; nullopt when every unit is listed, or when `stop` (checked before each
  // evaluation) says so.
  std::optional<size_t> next(const std::function<bool()>& stop = {});
  int64_t evaluations() const { return evaluations_; }

 private:
  struct Group {
    size_t begin, end;
    double cost;
    bool measured;
  };
  void push(Group g);
  Group pop();

  Cost cost_;
  std::vector<Group> heap_;
  int64_t evaluations_ = 0;
};

}  // namespace qtool::quantize

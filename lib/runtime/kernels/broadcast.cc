#include "runtime/kernels/broadcast.h"

namespace qtool::runtime::kernels {

Shape broadcast_shape(std::initializer_list<const Shape*> shapes, const NodeInfo& node) {
  size_t rank = 0;
  for (const Shape* s : shapes) rank = std::max(rank, s->size());
  Shape out(rank, 1);
  for (const Shape* s : shapes) {
    const size_t lead = rank - s->size();
    for (size_t i = 0; i < s->size(); ++i) {
      const int64_t d = (*s)[i];
      int64_t& o = out[lead + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string list;
      for (const Shape* t : shapes) list += (list.empty() ? "" : " and ") + shape_str(*t);
      throw BadInputError(node.label() + ": shapes " + list + " cannot be broadcast together");
    }
  }
  return out;
}

BroadcastPlan plan_broadcast(std::initializer_list<const Shape*> shapes, const NodeInfo& node) {
  BroadcastPlan p;
  p.out_shape = broadcast_shape(shapes, node);
  p.numel = shape_numel(p.out_shape);
  p.n_inputs = static_cast<int>(shapes.size());
  const size_t rank = p.out_shape.size();
  int k = 0;
  for (const Shape* s : shapes) {
    auto& fs = p.full_strides[k++];
    fs.assign(rank, 0);
    const size_t lead = rank - s->size();
    int64_t stride = 1;
    for (int64_t i = static_cast<int64_t>(s->size()) - 1; i >= 0; --i) {
      fs[lead + i] = (*s)[i] == 1 ? 0 : stride;
      stride *= (*s)[i];
    }
  }
  // Collapse: drop size-1 output dims, merge neighbours every input walks contiguously.
  for (size_t d = 0; d < rank; ++d) {
    if (p.out_shape[d] == 1) continue;
    bool merge = !p.dims.empty();
    for (int i = 0; i < p.n_inputs && merge; ++i) merge = p.strides[i].back() == p.full_strides[i][d] * p.out_shape[d];
    if (merge) {
      p.dims.back() *= p.out_shape[d];
      for (int i = 0; i < p.n_inputs; ++i) p.strides[i].back() = p.full_strides[i][d];
    } else {
      p.dims.push_back(p.out_shape[d]);
      for (int i = 0; i < p.n_inputs; ++i) p.strides[i].push_back(p.full_strides[i][d]);
    }
  }
  if (p.dims.empty()) {
    p.dims.push_back(1);
    for (int i = 0; i < p.n_inputs; ++i) p.strides[i].push_back(0);
  }
  return p;
}

}  // namespace qtool::runtime::kernels

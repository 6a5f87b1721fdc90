#include "text_table.h"

#include <algorithm>
#include <sstream>

namespace qtool::cli {

std::string table(const std::vector<std::vector<std::string>>& rows, const std::string& indent,
                  const std::vector<bool>& right_align) {
  std::vector<size_t> width;
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], r[c].size());
    }
  std::ostringstream os;
  for (const auto& r : rows) {
    std::string line = indent;
    for (size_t c = 0; c < r.size(); ++c) {
      const bool right = c < right_align.size() && right_align[c];
      const std::string pad(width[c] - r[c].size(), ' ');
      line += right ? pad + r[c] : r[c] + (c + 1 < r.size() ? pad : "");
      if (c + 1 < r.size()) line += "  ";
    }
    os << line << "\n";
  }
  return os.str();
}

}  // namespace qtool::cli

// Aligned text tables for the CLI's reports (qtool inspect).
#pragma once

#include <string>
#include <vector>

namespace qtool::cli {

// Rows of cells, each column padded to its widest cell, two spaces between columns; `right_align[c]` right-aligns
// column c (numbers).
std::string table(const std::vector<std::vector<std::string>>& rows, const std::string& indent,
                  const std::vector<bool>& right_align = {});

}  // namespace qtool::cli

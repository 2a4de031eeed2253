#include "swf.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ddppo {

namespace {

constexpr int kFields = 18;
constexpr const char* kNames[kFields] = {
    "job id",      "submit time",   "wait time",       "run time",       "allocated procs",
    "average cpu", "used memory",   "requested procs", "requested time", "requested memory",
    "status",      "user id",       "group id",        "executable",     "queue",
    "partition",   "preceding job", "think time"};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

[[noreturn]] void fail(size_t line, const std::string& what) {
  throw std::invalid_argument("line " + std::to_string(line) + ": " + what);
}

int64_t as_integer(double v, int field, size_t line) {
  if (v != std::floor(v) || std::fabs(v) > 9e15)
    fail(line, "field " + std::to_string(field + 1) + " (" + kNames[field] + ") is not an integer");
  return static_cast<int64_t>(v);
}

// "; MaxProcs: 1024" -> 1024 for key "MaxProcs"; -1 when the line is another header.
int64_t header_value(std::string_view line, std::string_view key) {
  size_t at = line.find(key);
  if (at == std::string_view::npos) return -1;
  size_t p = at + key.size();
  while (p < line.size() && (is_space(line[p]) || line[p] == ':')) ++p;
  int64_t v = -1;
  std::from_chars(line.data() + p, line.data() + line.size(), v);
  return v;
}

}  // namespace

SwfColumns parse_swf(std::string_view text) {
  SwfColumns c;
  size_t line_no = 0;
  size_t pos = 0;
  double f[kFields];
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    size_t p = 0;
    while (p < line.size() && is_space(line[p])) ++p;
    if (p == line.size()) continue;
    if (line[p] == ';') {
      if (int64_t v = header_value(line, "MaxProcs"); v > 0) c.max_procs = v;
      if (int64_t v = header_value(line, "MaxNodes"); v > 0) c.max_nodes = v;
      continue;
    }
    // Logs in the wild may carry extra columns after the 18th: they are ignored.
    for (int k = 0; k < kFields; ++k) {
      while (p < line.size() && is_space(line[p])) ++p;
      if (p == line.size()) fail(line_no, "expected 18 fields, found " + std::to_string(k));
      const char* first = line.data() + p;
      const char* last = line.data() + line.size();
      auto [end, ec] = std::from_chars(first, last, f[k]);
      if (ec != std::errc() || (end != last && !is_space(*end)) || !std::isfinite(f[k])) {
        const char* tok_end = first;
        while (tok_end != last && !is_space(*tok_end)) ++tok_end;
        fail(line_no, "field " + std::to_string(k + 1) + " (" + kNames[k] + ") is not a number: '" +
                          std::string(first, tok_end) + "'");
      }
      p = end - line.data();
    }
    c.id.push_back(as_integer(f[0], 0, line_no));
    c.submit.push_back(f[1]);
    c.runtime.push_back(f[3]);
    c.allocated_procs.push_back(as_integer(f[4], 4, line_no));
    c.requested_procs.push_back(as_integer(f[7], 7, line_no));
    c.requested_time.push_back(f[8]);
    c.user.push_back(as_integer(f[11], 11, line_no));
    c.group.push_back(as_integer(f[12], 12, line_no));
    c.queue.push_back(as_integer(f[14], 14, line_no));
  }
  return c;
}

}  // namespace ddppo

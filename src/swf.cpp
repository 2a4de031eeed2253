#include "swf.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <stdexcept>

namespace ddppo {

namespace {

constexpr const char* kNames[kSwfFields] = {
    "job id",      "submit time",   "wait time",       "run time",       "allocated procs",
    "average cpu", "used memory",   "requested procs", "requested time", "requested memory",
    "status",      "user id",       "group id",        "executable",     "queue",
    "partition",   "preceding job", "think time"};

// SWF fields that hold integers (ids, counts, codes); the others are times and amounts.
constexpr bool kInteger[kSwfFields] = {true,  false, false, false, true, false, false, true, false,
                                       false, true,  true,  true,  true, true,  true,  true, false};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// SWF fields are nearly all short integers: read those directly and leave anything else
// (fractions, exponents) to from_chars. Returns the end of the number, or nullptr.
const char* parse_number(const char* first, const char* last, double& value) {
  const char* p = first + (first != last && *first == '-');
  int64_t n = 0;
  const char* digits = p;
  for (; p != last && *p >= '0' && *p <= '9' && p - digits < 15; ++p) n = n * 10 + (*p - '0');
  if (p != digits && (p == last || is_space(*p))) {
    value = static_cast<double>(*first == '-' ? -n : n);
    return p;
  }
  auto [end, ec] = std::from_chars(first, last, value);
  return ec == std::errc() ? end : nullptr;
}

std::string field_name(int k) { return "field " + std::to_string(k + 1) + " (" + kNames[k] + ")"; }

// A bad field as its message quotes it: its first 40 bytes, any byte that is not printable
// ASCII as \xHH, so that a binary or non-UTF-8 line still makes a short message of text.
std::string quoted(const char* first, const char* last) {
  constexpr std::ptrdiff_t kShown = 40;
  std::string out = "'";
  for (const char* p = first; p != last && p - first < kShown; ++p) {
    auto c = static_cast<unsigned char>(*p);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out + (last - first > kShown ? "'..." : "'");
}

// Reads the first 18 fields of a job line into `f`; returns an error message, or "".
std::string read_fields(std::string_view line, size_t p, double* f) {
  for (int k = 0; k < kSwfFields; ++k) {
    while (p < line.size() && is_space(line[p])) ++p;
    if (p == line.size()) return "expected 18 fields, found " + std::to_string(k);
    const char* first = line.data() + p;
    const char* last = line.data() + line.size();
    const char* end = parse_number(first, last, f[k]);
    if (!end || (end != last && !is_space(*end)) || !std::isfinite(f[k])) {
      const char* tok_end = first;
      while (tok_end != last && !is_space(*tok_end)) ++tok_end;
      return field_name(k) + " is not a number: " + quoted(first, tok_end);
    }
    if (kInteger[k] && (f[k] != std::floor(f[k]) || std::fabs(f[k]) > 9e15))
      return field_name(k) + " is not an integer";
    p = end - line.data();
  }
  return "";  // logs in the wild may carry extra columns after the 18th: they are ignored
}

}  // namespace

SwfColumns parse_swf(std::string_view text, bool skip_bad) {
  SwfColumns c;
  size_t lines = std::count(text.begin(), text.end(), '\n') + 1;
  for (auto& f : c.fields) f.reserve(lines);
  size_t line_no = 0;
  double f[kSwfFields];
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    size_t p = 0;
    while (p < line.size() && is_space(line[p])) ++p;
    if (p == line.size()) continue;
    if (line[p] == ';') {
      c.header.emplace_back(line.substr(p + 1));
      continue;
    }
    if (std::string error = read_fields(line, p, f); !error.empty()) {
      if (!skip_bad) throw std::invalid_argument("line " + std::to_string(line_no) + ": " + error);
      ++c.skipped;
      continue;
    }
    for (int k = 0; k < kSwfFields; ++k) c.fields[k].push_back(f[k]);
  }
  return c;
}

}  // namespace ddppo

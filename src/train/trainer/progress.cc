#include "hpod/train/trainer/progress.h"

#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace hpod::train {
namespace {

// tqdm's Bar.UTF (U+2589..U+258F reversed, then a full block) and Bar.ASCII, one
// string per cell symbol.
constexpr std::string_view kUtfBar[] = {" ", "▏", "▎", "▍", "▌", "▋", "▊", "▉", "█"};
constexpr std::string_view kAsciiBar[] = {" ", "1", "2", "3", "4", "5", "6", "7", "8", "9", "#"};

std::string Printf(const char* fmt, double v) {
  char buf[512];
  int len = std::snprintf(buf, sizeof(buf), fmt, v);
  return std::string(buf, std::clamp(len, 0, static_cast<int>(sizeof(buf)) - 1));
}

// Python's '{:.3g}'.format(x); glibc differs only in printing "-nan".
std::string FormatG3(double x) {
  if (std::isnan(x)) return "nan";
  return Printf("%.3g", x);
}

// '{:5.2f}'.format(x).
std::string Format52(double x) {
  if (std::isnan(x)) return "  nan";
  return Printf("%5.2f", x);
}

void ReplaceAll(std::string& s, std::string_view from, std::string_view to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

// Python floor division / modulo (format_interval uses divmod).
int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t FloorMod(int64_t a, int64_t b) { return a - FloorDiv(a, b) * b; }

// Decodes one UTF-8 code point at s[i]; returns its length in bytes (1 for an
// invalid byte, which then counts as one code point).
size_t DecodeUtf8(std::string_view s, size_t i, char32_t* cp) {
  auto b = static_cast<unsigned char>(s[i]);
  size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) {
    *cp = b;
    return 1;
  }
  char32_t v = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < len; ++k) {
    auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) {
      *cp = b;
      return 1;
    }
    v = (v << 6) | (c & 0x3F);
  }
  *cp = v;
  return len;
}

// unicodedata.east_asian_width(ch) in "FW", for the blocks that matter in a
// progress line (CJK, Hangul, fullwidth forms, emoji).
bool IsWide(char32_t c) {
  return (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0x303E) ||
         (c >= 0x3041 && c <= 0x33FF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xA000 && c <= 0xA4CF) ||
         (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
         (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
         (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
         (c >= 0x1F900 && c <= 0x1F9FF) || (c >= 0x20000 && c <= 0x3FFFD);
}

// Length of the ANSI sequence tqdm's RE_ANSI (\x1b\[[;\d]*[A-Za-z]) matches at
// s[i], or 0.
size_t AnsiLength(std::string_view s, size_t i) {
  if (s[i] != '\x1b' || i + 1 >= s.size() || s[i + 1] != '[') return 0;
  size_t j = i + 2;
  while (j < s.size() && (s[j] == ';' || (s[j] >= '0' && s[j] <= '9'))) ++j;
  if (j < s.size() && ((s[j] >= 'A' && s[j] <= 'Z') || (s[j] >= 'a' && s[j] <= 'z'))) {
    return j + 1 - i;
  }
  return 0;
}

bool HasAnsi(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (AnsiLength(s, i) > 0) return true;
  }
  return false;
}

// Python len(): code points.
int CodePoints(std::string_view s) {
  int n = 0;
  char32_t cp;
  for (size_t i = 0; i < s.size(); i += DecodeUtf8(s, i, &cp)) ++n;
  return n;
}

// tqdm.utils.disp_trim: cut to `length` columns, closing an open ANSI colour.
std::string DispTrim(std::string data, int length) {
  if (CodePoints(data) == DisplayWidth(data)) {
    size_t i = 0;
    char32_t cp;
    for (int k = 0; k < length && i < data.size(); ++k) i += DecodeUtf8(data, i, &cp);
    data.resize(i);
    return data;
  }
  bool ansi_present = HasAnsi(data);
  while (!data.empty() && DisplayWidth(data) > length) {
    // Drop the last code point.
    size_t last = data.size() - 1;
    while (last > 0 && (static_cast<unsigned char>(data[last]) & 0xC0) == 0x80) --last;
    data.resize(last);
  }
  if (ansi_present && HasAnsi(data) && !data.ends_with("\x1b[0m")) data += "\x1b[0m";
  return data;
}

std::string Bar(double frac, int n_bars, bool ascii) {
  frac = std::clamp(frac, 0.0, 1.0);
  const std::span<const std::string_view> charset =
      ascii ? std::span<const std::string_view>(kAsciiBar)
            : std::span<const std::string_view>(kUtfBar);
  const int nsyms = static_cast<int>(charset.size()) - 1;
  // int(frac * N_BARS * nsyms), evaluated left to right as Python does.
  const auto cells = static_cast<int64_t>(frac * n_bars * nsyms);
  const int64_t full = cells / nsyms, part = cells % nsyms;
  std::string res;
  for (int64_t i = 0; i < full; ++i) res += charset[nsyms];
  if (full < n_bars) {
    res += charset[part];
    for (int64_t i = 0; i < n_bars - full - 1; ++i) res += charset[0];
  }
  return res;
}

std::string StripWhitespace(std::string_view s) {
  const char* ws = " \t\n\r\f\v";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(ws);
  return std::string(s.substr(b, e - b + 1));
}

// tqdm.set_postfix's string: "k1=v1, k2=v2".
std::string JoinPostfix(std::span<const PostfixItem> postfix) {
  std::string out;
  for (const PostfixItem& item : postfix) {
    if (!out.empty()) out += ", ";
    out += item.key;
    out += '=';
    if (const auto* d = std::get_if<double>(&item.value)) {
      out += FormatNum(*d);
    } else if (const auto* i = std::get_if<int64_t>(&item.value)) {
      out += FormatNum(*i);
    } else {
      out += StripWhitespace(std::get<std::string>(item.value));
    }
  }
  return out;
}

// tqdm's _screen_shape_linux, columns only.
std::optional<int> DetectColumns(std::FILE* stream) {
  winsize ws{};
  if (ioctl(fileno(stream), TIOCGWINSZ, &ws) == 0) {
    if (ws.ws_col > 0) return ws.ws_col;
    return std::nullopt;  // a pty nobody sized; tqdm would drop the bar, we keep 10 cells
  }
  const char* cols = std::getenv("COLUMNS");
  const char* lines = std::getenv("LINES");
  if (cols == nullptr || lines == nullptr) return std::nullopt;
  char* end = nullptr;
  long c = std::strtol(cols, &end, 10);
  if (end == cols || *end != '\0') return std::nullopt;
  std::strtol(lines, &end, 10);
  if (end == lines || *end != '\0') return std::nullopt;
  if (c - 1 <= 0 || c > 100000) return std::nullopt;
  return static_cast<int>(c - 1);
}

}  // namespace

std::string PythonFloatRepr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  // Shortest round-trip digits, as Python's repr (David Gay's mode 0) picks.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string_view sci(buf, end - buf);  // "-1.2345e+03"
  std::string out;
  if (sci.front() == '-') {
    out = "-";
    sci.remove_prefix(1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits += c;
  }
  int exp10 = 0;
  std::from_chars(sci.data() + e_pos + (sci[e_pos + 1] == '+' ? 2 : 1), sci.data() + sci.size(),
                  exp10);
  const int ndigits = static_cast<int>(digits.size());
  const int decpt = exp10 + 1;  // digits d1d2.. mean 0.d1d2.. x 10^decpt
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (ndigits > 1) out += "." + digits.substr(1);
    const int e = decpt - 1;
    out += e < 0 ? "e-" : "e+";
    if (std::abs(e) < 10) out += '0';
    out += std::to_string(std::abs(e));
  } else if (decpt <= 0) {
    out += "0." + std::string(-decpt, '0') + digits;
  } else if (decpt >= ndigits) {
    out += digits + std::string(decpt - ndigits, '0') + ".0";
  } else {
    out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return out;
}

std::string FormatNum(double n) {
  std::string f = FormatG3(n);
  ReplaceAll(f, "+0", "+");
  ReplaceAll(f, "-0", "-");
  std::string s = PythonFloatRepr(n);
  return f.size() < s.size() ? f : s;
}

std::string FormatNum(int64_t n) {
  // '{:.3g}'.format(int) formats float(n).
  std::string f = FormatG3(static_cast<double>(n));
  ReplaceAll(f, "+0", "+");
  ReplaceAll(f, "-0", "-");
  std::string s = std::to_string(n);
  return f.size() < s.size() ? f : s;
}

std::string LightningFormatNum(double n) {
  constexpr size_t kPadSize = 5;  // Lightning's _PAD_SIZE
  std::string s = FormatNum(n);
  if (s.find('e') != std::string::npos) return s;
  // float(s) always parses here (s came from a float), so Lightning's
  // try/except never returns early.
  if (s.find('.') == std::string::npos && s.size() < kPadSize) s += '.';
  if (s.size() < kPadSize) s += std::string(kPadSize - s.size(), '0');
  return s;
}

std::string FormatInterval(double seconds) {
  // int(t), kept inside int64 (Python would print arbitrarily many hours).
  constexpr double kMax = 9.2e18;
  const double clamped = std::isnan(seconds) ? 0 : std::clamp(seconds, -kMax, kMax);
  const auto t = static_cast<int64_t>(clamped);
  const int64_t mins = FloorDiv(t, 60), s = FloorMod(t, 60);
  const int64_t h = FloorDiv(mins, 60), m = FloorMod(mins, 60);
  char buf[64];
  if (h != 0) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(h),
                  static_cast<long long>(m), static_cast<long long>(s));
  } else {
    std::snprintf(buf, sizeof(buf), "%02lld:%02lld", static_cast<long long>(m),
                  static_cast<long long>(s));
  }
  return buf;
}

int DisplayWidth(std::string_view s) {
  int width = 0;
  size_t i = 0;
  while (i < s.size()) {
    if (size_t ansi = AnsiLength(s, i); ansi > 0) {
      i += ansi;
      continue;
    }
    char32_t cp;
    i += DecodeUtf8(s, i, &cp);
    width += IsWide(cp) ? 2 : 1;
  }
  return width;
}

std::string FormatMeter(int64_t n, std::optional<int64_t> total, double elapsed_s,
                        std::optional<double> rate, std::string_view desc,
                        std::span<const PostfixItem> postfix, bool ascii,
                        std::optional<int> ncols) {
  // tqdm treats total 0 like no total, and n past the total as "total unknown".
  const int64_t total_n = total.value_or(0);
  const bool has_total =
      total_n != 0 && static_cast<double>(n) < static_cast<double>(total_n) + 0.5;
  const int width = ncols.value_or(-1);  // < 0: unknown
  const std::string elapsed_str = FormatInterval(elapsed_s);
  if (!rate && elapsed_s != 0) rate = static_cast<double>(n) / elapsed_s;
  // Python truthiness of the rate; a NaN (tqdm would crash on it) counts as unknown.
  const bool rate_known = rate && *rate != 0 && !std::isnan(*rate);
  const double r = rate_known ? *rate : 0;
  const double inv_rate = rate_known ? 1 / r : 0;
  std::string rate_fmt;
  if (inv_rate != 0 && inv_rate > 1) {
    rate_fmt = Format52(inv_rate) + "s/it";
  } else {
    rate_fmt = (rate_known ? Format52(r) : std::string("?")) + "it/s";
  }
  std::string postfix_str = JoinPostfix(postfix);
  if (!postfix_str.empty()) postfix_str = ", " + postfix_str;

  if (!has_total) {
    std::string out = desc.empty() ? std::string() : std::string(desc) + ": ";
    return out + std::to_string(n) + "it [" + elapsed_str + ", " + rate_fmt + postfix_str + "]";
  }

  const double remaining = rate_known ? static_cast<double>(total_n - n) / r : 0;
  const std::string remaining_str = rate_known ? FormatInterval(remaining) : "?";
  std::string l_bar;
  if (!desc.empty()) l_bar = desc.ends_with(": ") ? std::string(desc) : std::string(desc) + ": ";
  const std::string r_bar = "| " + std::to_string(n) + "/" + std::to_string(total_n) + " [" +
                            elapsed_str + "<" + remaining_str + ", " + rate_fmt + postfix_str + "]";
  const double frac = static_cast<double>(n) / static_cast<double>(total_n);
  l_bar += Printf("%3.0f", frac * 100) + "%|";
  if (width == 0) return l_bar.substr(0, l_bar.size() - 1) + r_bar.substr(1);
  const int n_bars = width > 0 ? std::max(1, width - DisplayWidth(l_bar + r_bar)) : 10;
  std::string res = l_bar + Bar(frac, n_bars, ascii) + r_bar;
  return width > 0 ? DispTrim(std::move(res), width) : res;
}

// ---------------------------------------------------------------------------
// ProgressBar

ProgressBar::ProgressBar(std::FILE* stream, const Clock& clock, ProgressBarOptions options)
    : stream_(stream), clock_(clock), options_(std::move(options)) {
  is_tty_ = options_.is_tty.value_or(isatty(fileno(stream_)) == 1);
  ncols_ = options_.ncols ? options_.ncols : DetectColumns(stream_);
  n_ = last_print_n_ = options_.initial;
  start_t_ = last_print_t_ = clock_.SteadyNow();
  Display(Line(/*average_rate=*/false));
}

ProgressBar::~ProgressBar() { Close(); }

double ProgressBar::SecondsSince(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration<double>(clock_.SteadyNow() - t).count();
}

std::string ProgressBar::Line(bool average_rate) const {
  const double elapsed = SecondsSince(start_t_);
  std::optional<double> rate;
  if (!average_rate && ema_calls_ > 0 && ema_dt_ != 0) {
    // tqdm's EMA.__call__ for both, bias correction included (it cancels, but
    // dividing the same way keeps the digits identical to tqdm's).
    const double correction = 1 - std::pow(1 - options_.smoothing, ema_calls_);
    rate = (ema_dn_ / correction) / (ema_dt_ / correction);
  } else if (elapsed != 0) {
    rate = static_cast<double>(n_ - options_.initial) / elapsed;
  }
  std::vector<PostfixItem> shown = postfix_;
  if (options_.lightning_number_padding) {
    for (PostfixItem& item : shown) {
      if (const auto* d = std::get_if<double>(&item.value)) item.value = LightningFormatNum(*d);
    }
  }
  return FormatMeter(n_, options_.total, elapsed, rate, options_.desc, shown, options_.ascii,
                     ncols_);
}

std::string ProgressBar::CurrentLine() const { return Line(/*average_rate=*/false); }

bool ProgressBar::Update(int64_t increment) {
  if (closed_) return false;
  if (increment < 0) last_print_n_ += increment;  // as tqdm, so dn stays the forward progress
  n_ += increment;
  if (n_ - last_print_n_ < 1) return false;  // miniters = 1
  const auto now = clock_.SteadyNow();
  const double dt = std::chrono::duration<double>(now - last_print_t_).count();
  const double interval = is_tty_ ? options_.mininterval_s : options_.noninteractive_interval_s;
  if (dt < interval) return false;
  const int64_t dn = n_ - last_print_n_;
  if (options_.smoothing != 0 && dt != 0 && dn != 0) {
    const double a = options_.smoothing;
    ema_dn_ = a * static_cast<double>(dn) + (1 - a) * ema_dn_;
    ema_dt_ = a * dt + (1 - a) * ema_dt_;
    ++ema_calls_;
  }
  Display(Line(/*average_rate=*/false));
  last_print_n_ = n_;
  last_print_t_ = now;
  return true;
}

bool ProgressBar::SetN(int64_t n) { return Update(n - n_); }

void ProgressBar::SetPostfix(std::vector<PostfixItem> postfix) { postfix_ = std::move(postfix); }

void ProgressBar::SetDescription(std::string desc) { options_.desc = std::move(desc); }

void ProgressBar::Refresh() {
  if (!closed_) Display(Line(/*average_rate=*/false));
}

void ProgressBar::Close() {
  if (closed_) return;
  closed_ = true;
  Display(Line(/*average_rate=*/true));  // a non-TTY line already ends in "\n"
  if (is_tty_) Write("\n");
}

void ProgressBar::Display(const std::string& line) {
  if (!is_tty_) {
    Write(line + "\n");
    return;
  }
  const int width = DisplayWidth(line);
  Write("\r" + line + std::string(std::max(last_len_ - width, 0), ' '));
  last_len_ = width;
}

void ProgressBar::Write(const std::string& s) {
  // Best effort (see the class comment): a full disk must not stop training.
  (void)std::fwrite(s.data(), 1, s.size(), stream_);
  (void)std::fflush(stream_);
}

}  // namespace hpod::train

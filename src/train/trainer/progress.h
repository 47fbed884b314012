#pragma once

// The training progress line, byte-compatible with tqdm 4.64 (Debian's
// python3-tqdm, `tqdm/std.py`) as NeMo / PyTorch Lightning print it:
//
//   Epoch 0:  22%|██▏       | 4499/20101 [22:26:14<77:48:37, 17.95s/it, loss=2.43, ...]
//
// FormatMeter is a pure function (tqdm.format_meter); ProgressBar adds tqdm's
// update policy (mininterval, EMA rate, "\r" redraw with padding) on a TTY and a
// line-per-update policy for job logs.

#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hpod/base/clock.h"

namespace hpod::train {

// One `key=value` of the postfix. Items are printed in the order given (as
// Lightning passes an ordered dict to set_postfix), not sorted.
//   double / int64_t: formatted with FormatNum (tqdm.format_num);
//   std::string:      printed as is, minus surrounding whitespace (tqdm strips).
struct PostfixItem {
  std::string key;
  std::variant<double, int64_t, std::string> value;
};

// tqdm.format_num: '{:.3g}' with "+0"/"-0" collapsed ("1.16e+06" -> "1.16e+6",
// "-0.5" -> "-.5"), used only when shorter than Python's str(n) ("1864.0" stays).
std::string FormatNum(double n);
std::string FormatNum(int64_t n);

// PyTorch Lightning's Tqdm.format_num for a float (what NeMo's bar prints for
// float metrics): FormatNum, then right-padded with zeros to 5 characters unless
// it has an exponent ("2.470", "16.40", "2.000", "0.121", "1864.0", "1.16e+6").
std::string LightningFormatNum(double n);

// Python's str(float) (repr: shortest round-trip digits; exponent form when the
// decimal exponent is < -4 or >= 16; "inf", "nan", "-0.0").
std::string PythonFloatRepr(double x);

// tqdm.format_interval: "MM:SS", or "H:MM:SS" with unbounded hours ("77:48:37").
// Seconds are truncated toward zero first (Python int()).
std::string FormatInterval(double seconds);

// On-screen width of a UTF-8 string as tqdm's disp_len computes it: ANSI SGR
// sequences count 0, East Asian wide/fullwidth code points 2, others 1.
int DisplayWidth(std::string_view utf8);

// tqdm.format_meter with the default bar_format, unit "it", no unit_scale:
//   "{desc}: {pct:3.0f}%|{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}{postfix}]"
// - desc and ": " are omitted when desc is empty; a desc already ending in ": "
//   gets no second one.
// - Without a total (nullopt or 0), or when n >= total + 0.5 (tqdm's sanity
//   check), the line is "{desc}: {n}it [{elapsed}, {rate}{postfix}]".
// - rate: iterations per second; nullopt means tqdm's default n / elapsed (when
//   elapsed > 0). A zero or unknown rate prints "?it/s" and remaining "?".
//   "{:5.2f}s/it" when 1/rate > 1, else "{:5.2f}it/s" (exactly 1 it/s is "it/s").
// - remaining = (total - n) / rate.
// - bar: Unicode " ▏▎▍▌▋▊▉█" or, with `ascii`, " 123456789#"; 10 cells when
//   ncols is nullopt (or negative), otherwise sized to make the line ncols columns
//   wide (at least 1 cell) and the line trimmed to ncols; ncols == 0 prints no bar
//   and no "|" ("{pct}% {n}/{total} [...]").
std::string FormatMeter(int64_t n, std::optional<int64_t> total, double elapsed_s,
                        std::optional<double> rate, std::string_view desc,
                        std::span<const PostfixItem> postfix, bool ascii, std::optional<int> ncols);

struct ProgressBarOptions {
  std::string desc;              // "Epoch 0"
  std::optional<int64_t> total;  // nullopt: no bar, no ETA
  int64_t initial = 0;           // starting n (resumed runs); not counted in the average rate
  bool ascii = false;            // " 123456789#" instead of block glyphs
  // Line width. nullopt: detected as tqdm does (ioctl(TIOCGWINSZ) on the stream,
  // else $COLUMNS - 1 when both COLUMNS and LINES are set, else a 10-cell bar).
  // A terminal that reports 0 columns counts as unknown.
  std::optional<int> ncols;
  // Whether the stream is a terminal. nullopt: isatty(fileno(stream)).
  std::optional<bool> is_tty;
  // TTY: minimum seconds between redraws (tqdm's mininterval).
  double mininterval_s = 0.1;
  // Not a TTY (Slurm output files, pipes): one full line per update, at most one
  // every this many seconds. 10 s keeps a fast run's log at ~360 lines an hour,
  // while every step of a slow run (seconds per step, as large models train) is
  // logged. The initial line and Close() are always written.
  double noninteractive_interval_s = 10.0;
  // tqdm's EMA smoothing of the live rate (0: use the average over the run).
  double smoothing = 0.3;
  // Format double postfix values as Lightning's bar does (LightningFormatNum:
  // "2.470", "16.40") rather than plain tqdm ("2.47"), as the seed's line shows.
  bool lightning_number_padding = true;
};

// A tqdm-style progress bar on a stdio stream.
//
// TTY: each display writes "\r" + line + spaces up to the previous line's width,
// at most every mininterval_s (tqdm's status_printer); Close() redraws with the
// run's average rate and writes "\n".
// Not a TTY: each display writes line + "\n", at most every
// noninteractive_interval_s (measured from the previous line, so a run slower than
// the interval logs every step); Close() writes the final line + "\n".
// The constructor displays the initial line (n = initial, "?it/s"), as tqdm does.
// The live rate is tqdm's EMA of dn/dt over displays (bias-corrected).
// A display needs at least one iteration of progress since the previous one
// (tqdm with miniters=1; its dynamic miniters only saves clock reads, which cost
// nothing next to a training step): Update(0) and negative updates do not redraw,
// Refresh() does. Write errors are ignored: the progress line is best effort and
// must never stop training.
//
// Thread contract: not thread-safe; one thread calls all methods. The stream
// must outlive the bar and is not written by others while it is open.
class ProgressBar {
 public:
  ProgressBar(std::FILE* stream, const Clock& clock, ProgressBarOptions options);
  ~ProgressBar();  // Close()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Advances n by `increment` (may be negative) and displays when the interval
  // allows. Returns true when a line was written.
  bool Update(int64_t increment = 1);
  // Sets n (absolute); same display policy as Update.
  bool SetN(int64_t n);
  // Shown from the next display on (no redraw by itself, so a postfix set every
  // step costs no I/O; tqdm's set_postfix(refresh=False)).
  void SetPostfix(std::vector<PostfixItem> postfix);
  // "Epoch 1"; shown from the next display on.
  void SetDescription(std::string desc);
  // Displays now regardless of the interval (the EMA is not updated).
  void Refresh();
  // Writes the final line (average rate) and "\n". Idempotent; later calls to
  // Update/Refresh do nothing.
  void Close();

  int64_t n() const { return n_; }
  bool closed() const { return closed_; }
  bool is_tty() const { return is_tty_; }
  std::optional<int> ncols() const { return ncols_; }
  // The line the next display would print (for tests and logs).
  std::string CurrentLine() const;

 private:
  double SecondsSince(std::chrono::steady_clock::time_point t) const;
  // The line at the current time: live EMA rate, or the run's average when
  // `average_rate` (Close) or before the EMA has a sample.
  std::string Line(bool average_rate) const;
  void Display(const std::string& line);
  void Write(const std::string& s);

  std::FILE* stream_;
  const Clock& clock_;
  ProgressBarOptions options_;
  bool is_tty_ = false;
  std::optional<int> ncols_;
  std::vector<PostfixItem> postfix_;

  int64_t n_ = 0;
  int64_t last_print_n_ = 0;
  std::chrono::steady_clock::time_point start_t_;
  std::chrono::steady_clock::time_point last_print_t_;
  // tqdm's EMA (utils.EMA): last = a*x + (1-a)*last; value = last / (1 - (1-a)^calls).
  double ema_dn_ = 0, ema_dt_ = 0;
  int ema_calls_ = 0;
  int last_len_ = 0;  // display width of the previous TTY line
  bool closed_ = false;
};

}  // namespace hpod::train

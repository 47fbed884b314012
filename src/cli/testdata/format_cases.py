# Prints the formatter reference cases embedded in output_test.cc: what awscli's
# text.format_text and TableFormatter (colour off, fixed terminal width) print.
#   python3 format_cases.py   (needs awscli importable)
import io, json, awscli.table as T
from awscli import text
from awscli.formatter import TableFormatter
class Args: color='off'; query=None
def table(title, data, width):
    T.determine_terminal_width = lambda default_width=80: width
    f = TableFormatter(Args()); s = io.StringIO()
    f._format_response(title, data, s); return s.getvalue()
def txt(data):
    s = io.StringIO(); text.format_text(data, s); return s.getvalue()
tdata = [
 "just a string", ["a", "b", 3], {"b": 1, "a": "x", "c": None, "d": True, "e": 1.5},
 {"L": [{"a": 1, "b": 2}, {"a": 3, "c": {"z": 1}}, {"b": 4}]},
 [[1, 2], "x", [3, [4]]], {"Outer": {"Inner": [1, 2], "s": "v"}}, [], {}, None,
 {"Items": [{"K": "v", "Sub": [{"x": 1}]}, {"K": "w"}]},
]
tables = [
 ("Op", {"A": "x", "B": 2}, 80), ("Op", {"OnlyKey": "value"}, 80), ("Op", ["a", "b"], 80), ("Op", "scalar", 80),
 ("Op", 0, 80), ("Op", {}, 80), ("Op", [], 80), ("Op", [[1, 2], [3, 4]], 80),
 ("Op", {"Name": "n" * 50, "Arn": "arn:" + "a" * 60, "Status": "InService"}, 80),
 ("Op", {"Name": "n" * 50, "Arn": "arn:" + "a" * 60, "Status": "InService"}, 200),
 ("Op", {"L": [{"a": 1, "b": "two"}, {"a": 3, "c": "x"}]}, 80),
 ("Op", {"L": [{"a": 1, "More": {"k": "v"}}, {"a": 2}]}, 80),
 ("ListClusters", {"ClusterSummaries": [{"ClusterName": "c1"}], "NextToken": "t"}, 80),
 ("Op", [{"x": 1}, {"y": 2}], 40), ("Op", {"T": [["a", "b"], ["c", "d"]]}, 80),
 ("Op", {"Flag": False, "N": None, "F": 1.25}, 80),
 ("LongTitleOperationNameThatIsWide", {"a": "b"}, 30),
]
print(json.dumps({"text": [[d, txt(d)] for d in tdata], "table": [[t, d, w, table(t, d, w)] for t, d, w in tables]}))

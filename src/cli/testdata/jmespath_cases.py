# Prints the JMESPath reference cases embedded in jmespath_test.cc:
#   python3 jmespath_cases.py   (needs the `jmespath` package, e.g. the one awscli ships)
import json, jmespath
data = {"ClusterSummaries": [
   {"ClusterArn": "arn:c1", "ClusterName": "c1", "ClusterStatus": "InService", "Count": 3, "Tags": ["a", "b"]},
   {"ClusterArn": "arn:c2", "ClusterName": "c2", "ClusterStatus": "Creating", "Count": 1, "Tags": []},
   {"ClusterArn": "arn:c3", "ClusterName": "c3", "ClusterStatus": "Failed", "Count": 0, "Tags": ["c"], "Nested": {"x": [1, [2, 3]]}}],
 "NextToken": None, "Flag": False, "Empty": "", "Obj": {"b": 1, "a": 2}, "Matrix": [[1, 2], [3, [4, 5]], 6]}
exprs = ["ClusterSummaries[0].ClusterName", "ClusterSummaries[-1].ClusterName", "ClusterSummaries[5]",
 "ClusterSummaries[*].ClusterName", "ClusterSummaries[].ClusterName", "ClusterSummaries[].Tags[]",
 "ClusterSummaries[].Tags", "ClusterSummaries[*].Tags[0]", "ClusterSummaries[].[ClusterName, ClusterStatus]",
 "ClusterSummaries[].{n: ClusterName, s: ClusterStatus}", "ClusterSummaries[?ClusterStatus=='InService'].ClusterName",
 "ClusterSummaries[?Count > `0`].ClusterName", "ClusterSummaries[?Count >= `1` && ClusterStatus != 'Failed'].ClusterArn",
 "ClusterSummaries[?!Tags].ClusterName", "ClusterSummaries[?Nested].Nested.x[]", "Obj.*", "*.b", "Matrix[]", "Matrix[][]",
 "Matrix[1][1][0]", "ClusterSummaries[0:2].ClusterName", "ClusterSummaries[::-1].ClusterName", "ClusterSummaries[1:].Count",
 "ClusterSummaries | [0]", "ClusterSummaries[].ClusterName | [1]", "NextToken || 'none'", "Flag && 'x'", "Empty || Obj.a",
 "@.Obj.b", "`[1, 2]`", "'raw'", "Missing.Deep.Path", "ClusterSummaries[].Missing", "[ClusterSummaries[0].Count, Obj.a]",
 "ClusterSummaries[?ClusterName > 'c1'].ClusterName", "ClusterSummaries[*].Nested.x", "Obj.\"a\"", "length_is_not_a_field",
 "ClusterSummaries[].Count[]", "ClusterSummaries[?Count==`3`] | [0].ClusterName", "Matrix[*][0]", "Obj.[a, b]",
 "ClusterSummaries[].Tags[?@ == 'a']", "!Flag", "Obj.a == `2`", "ClusterSummaries[0].Count < `10`", "`true` == `1`"]
print(json.dumps({"data": data, "cases": [[e, jmespath.search(e, data)] for e in exprs]}, indent=None))

"""End-to-end: pagination and output formats of the real `aws sagemaker` CLI (v1).

--page-size (the CLI follows NextToken by itself), --max-items with the CLI's
own NextToken and --starting-token, the list-clusters filters and sort orders,
and --output text/table.
"""
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpodtest  # noqa: E402
from hpodtest import group, parallel  # noqa: E402


class AwsCliPagingTest(hpodtest.CliTestCase):
    NAMES = ["pg-alpha", "pg-bravo", "pg-charlie", "pg-delta", "pg-echo"]

    @classmethod
    def setUpClass(cls):
        cls.d = hpodtest.Daemon(pending_ms=50).start()
        cls.addClassCleanup(cls.d.cleanup)
        b = cls.d.boto3()
        times = []
        for i, name in enumerate(cls.NAMES):
            if i == 3:
                # botocore sends CreationTimeAfter as whole seconds, so leave a whole
                # second boundary between the first three clusters and the last two.
                cls.boundary = math.floor(times[-1]) + 1
                time.sleep(max(0, cls.boundary + 0.05 - time.time()))
            b.create_cluster(ClusterName=name, InstanceGroups=[group("g", 0)])
            times.append(b.describe_cluster(ClusterName=name)["CreationTime"].timestamp())
            time.sleep(0.005)  # CreationTime has millisecond resolution: keep them distinct
        cls.times = times

    def test_auto_pagination_and_formats(self):
        text, table, by_name, contains, after = parallel(
            lambda: self.cli("list-clusters", "--page-size", "2", "--output", "text"),
            lambda: self.cli("list-clusters", "--output", "table"),
            lambda: self.cli("list-clusters", "--sort-by", "NAME", "--sort-order", "Descending",
                             "--page-size", "3"),
            lambda: self.cli("list-clusters", "--name-contains", "ha"),
            lambda: self.cli("list-clusters", "--creation-time-after", str(self.boundary)))
        # --page-size 2: the CLI follows NextToken and prints all five, oldest first.
        self.assertIsInstance(text, str)
        rows = [l.split("\t") for l in text.splitlines() if l.startswith("CLUSTERSUMMARIES")]
        self.assertEqual([r[2] for r in rows], self.NAMES, text)
        self.assertNotIn("NEXTTOKEN", text.upper())
        for name in self.NAMES:
            self.assertIn(" %s " % name, table)
        self.assertIn("ListClusters", table)
        self.assertEqual([c["ClusterName"] for c in by_name["ClusterSummaries"]],
                         sorted(self.NAMES, reverse=True))
        self.assertEqual([c["ClusterName"] for c in contains["ClusterSummaries"]],
                         ["pg-alpha", "pg-charlie"])
        self.assertEqual([c["ClusterName"] for c in after["ClusterSummaries"]],
                         ["pg-delta", "pg-echo"])

    def test_max_items_and_starting_token(self):
        seen, token, pages = [], None, 0
        while True:
            args = ["list-clusters", "--max-items", "2", "--page-size", "2"]
            if token:
                args += ["--starting-token", token]
            out = self.cli(*args)
            pages += 1
            seen += [c["ClusterName"] for c in out["ClusterSummaries"]]
            token = out.get("NextToken")
            if not token:
                break
            self.assertLess(pages, 5, "pagination does not end")
        self.assertEqual(seen, self.NAMES)
        self.assertEqual(pages, 3)


if __name__ == "__main__":
    hpodtest.require_aws_clients()
    hpodtest.main()

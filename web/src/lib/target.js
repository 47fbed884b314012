// Names the console derives from API data.

/** The 12-character cluster id at the end of a cluster ARN ("" if none). */
export function clusterId(arn) {
  const m = /:cluster\/([a-z0-9]{12})$/.exec(arn || '');
  return m ? m[1] : '';
}

/** HpodStartSession's Target: sagemaker-cluster:<cluster-id>_<group>-<instance-id>
 * (src/cli/session.h), the form `aws ssm start-session` uses for HyperPod. */
export function sessionTarget(clusterArn, groupName, instanceId) {
  return `sagemaker-cluster:${clusterId(clusterArn)}_${groupName}-${instanceId}`;
}

/** The short hostname (Slurm's NodeName) of a PrivateDnsHostname. */
export function shortHostname(dns) {
  return (dns || '').split('.')[0];
}

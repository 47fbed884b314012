// Instance groups as the console builds them: from the create form, from pasted
// JSON (the seed's examples/demo-cluster.json is an array of them), and for a
// scale (UpdateCluster names each changed group with its whole specification
// and the new InstanceCount: hpodd replaces the group's spec with what it is
// sent). Pure functions; the API does all validation and its messages are shown.

// ClusterInstanceGroupSpecification's members (src/api/sagemaker_cluster_model.json).
// DescribeCluster's group details are the stored specification plus output-only
// members (CurrentCount, TargetCount, Status, ...), so a scale keeps exactly these.
export const SPEC_MEMBERS = [
  'InstanceCount', 'MinInstanceCount', 'InstanceGroupName', 'InstanceType',
  'InstanceRequirements', 'LifeCycleConfig', 'ExecutionRole', 'ThreadsPerCore',
  'InstanceStorageConfigs', 'OnStartDeepHealthChecks', 'TrainingPlanArn', 'OverrideVpcConfig',
  'ScheduledUpdateConfig', 'ImageId', 'KubernetesConfig', 'SlurmConfig', 'CapacityRequirements',
  'NetworkInterface',
];

export const DEFAULT_ROLE = 'arn:aws:iam::123456789012:role/AmazonSagemakerExecutionRole';
export const SLURM_NODE_TYPES = ['Controller', 'Login', 'Compute'];

/** A count as typed: an integer when it is one, else the text (the API says why not). */
function count(text) {
  const t = String(text ?? '').trim();
  return /^\d+$/.test(t) ? Number(t) : t === '' ? undefined : t;
}

function text(v) {
  const t = String(v ?? '').trim();
  return t === '' ? undefined : t;
}

/**
 * The create form's fields of one group → a ClusterInstanceGroupSpecification.
 * Empty fields are left out (so the API reports a missing required member).
 *
 * @param {{name, instanceType, count, source, onCreate, role, slurmNodeType,
 *     partition}} f
 */
export function groupFromForm(f) {
  const g = {};
  const set = (k, v) => {
    if (v !== undefined) g[k] = v;
  };
  set('InstanceGroupName', text(f.name));
  set('InstanceType', text(f.instanceType));
  set('InstanceCount', count(f.count));
  const lc = {};
  if (text(f.source) !== undefined) lc.SourceS3Uri = text(f.source);
  if (text(f.onCreate) !== undefined) lc.OnCreate = text(f.onCreate);
  if (Object.keys(lc).length) g.LifeCycleConfig = lc;
  set('ExecutionRole', text(f.role));
  if (text(f.slurmNodeType) !== undefined) {
    g.SlurmConfig = { NodeType: text(f.slurmNodeType) };
    if (text(f.partition) !== undefined) g.SlurmConfig.PartitionNames = [text(f.partition)];
  }
  return g;
}

/** The create form's request. */
export function createRequest(clusterName, nodeRecovery, groups) {
  const req = { ClusterName: String(clusterName ?? '').trim(), InstanceGroups: groups };
  if (nodeRecovery) req.NodeRecovery = nodeRecovery;
  return req;
}

/**
 * Pasted JSON → a CreateCluster request. Accepts the seed's form (an array of
 * instance groups) or a whole request ({ClusterName?, InstanceGroups, ...}); the
 * form's cluster name and NodeRecovery fill what the paste leaves out.
 * Throws an Error with a message for text that is not such JSON.
 */
export function requestFromPaste(textValue, clusterName, nodeRecovery) {
  let parsed;
  try {
    parsed = JSON.parse(textValue);
  } catch (err) {
    throw new Error(`The pasted text is not JSON: ${err.message}`);
  }
  if (Array.isArray(parsed)) return createRequest(clusterName, nodeRecovery, parsed);
  if (parsed && typeof parsed === 'object' && Array.isArray(parsed.InstanceGroups)) {
    const req = { ...parsed };
    if (!req.ClusterName && clusterName) req.ClusterName = String(clusterName).trim();
    if (!req.NodeRecovery && nodeRecovery) req.NodeRecovery = nodeRecovery;
    return req;
  }
  throw new Error('Paste an array of instance groups (as examples/demo-cluster.json) or a ' +
    'CreateCluster request with InstanceGroups');
}

/** A group as DescribeCluster shows it → its specification with a new count. */
export function scaledGroup(details, newCount) {
  const g = {};
  for (const k of SPEC_MEMBERS) if (details[k] !== undefined) g[k] = details[k];
  g.InstanceCount = count(newCount);
  return g;
}

/** UpdateCluster's request for scaling one group of `cluster` (DescribeCluster). */
export function scaleRequest(cluster, groupName, newCount) {
  const details = (cluster.InstanceGroups || []).find((g) => g.InstanceGroupName === groupName);
  if (!details) throw new Error(`Cluster ${cluster.ClusterName} has no instance group ${groupName}`);
  return { ClusterName: cluster.ClusterName, InstanceGroups: [scaledGroup(details, newCount)] };
}

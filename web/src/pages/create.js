// Create a cluster: a form of instance groups, or the seed's JSON pasted as is.
// The console checks nothing itself: CreateCluster's validation messages are
// shown exactly as the API gives them.

import { errorBox, field, h, replace, uid } from '../lib/dom.js';
import { createRequest, DEFAULT_ROLE, groupFromForm, requestFromPaste, SLURM_NODE_TYPES }
  from '../lib/groups.js';
import { href } from '../lib/router.js';

// Suggestions only (any type the API accepts may be typed).
const COMMON_TYPES = ['ml.c5.large', 'ml.c5.xlarge', 'ml.c5.2xlarge', 'ml.c5.4xlarge',
  'ml.m5.xlarge', 'ml.m5.2xlarge', 'ml.t3.medium', 'ml.g5.xlarge', 'ml.g5.12xlarge',
  'ml.g5.48xlarge', 'ml.p4d.24xlarge', 'ml.p5.48xlarge', 'ml.trn1.32xlarge'];

function groupFieldset(index, onRemove) {
  const id = (k) => `group-${index}-${k}`;
  const input = (k, props = {}) => h('input', { type: 'text', autocomplete: 'off',
    spellcheck: 'false', testid: id(k), ...props });
  const inputs = {
    name: input('name'),
    instanceType: input('type', { list: 'instance-types', value: 'ml.c5.xlarge' }),
    count: input('count', { inputmode: 'numeric', value: '1' }),
    source: input('source', { placeholder: 's3://bucket/LifecycleScripts/base-config/' }),
    onCreate: input('oncreate', { value: 'on_create.sh' }),
    role: input('role', { value: DEFAULT_ROLE }),
    slurmNodeType: h('select', { testid: id('slurm') },
      h('option', { value: '' }, '(none)'),
      SLURM_NODE_TYPES.map((t) => h('option', { value: t }, t))),
    partition: input('partition', { placeholder: 'dev' }),
  };
  const el = h('fieldset', { class: 'group', testid: `group-${index}` },
    h('legend', {}, `Instance group ${index + 1}`),
    h('div', { class: 'grid' },
      field('Name', inputs.name),
      field('Instance type', inputs.instanceType),
      field('Instance count', inputs.count),
      field('Lifecycle scripts (SourceS3Uri)', inputs.source),
      field('OnCreate script', inputs.onCreate),
      field('Execution role ARN', inputs.role),
      field('Slurm node type', inputs.slurmNodeType),
      field('Slurm partition', inputs.partition, 'Optional; one partition')),
    h('div', { class: 'actions' }, h('button', { type: 'button', class: 'secondary small',
      testid: id('remove'), onclick: () => onRemove(el) }, 'Remove group')));
  const read = () => Object.fromEntries(Object.entries(inputs).map(([k, v]) => [k, v.value]));
  return { el, read };
}

export function renderCreate(page) {
  if (!page.isAdmin) {
    return h('section', { testid: 'create-forbidden' }, h('h1', {}, 'Create cluster'),
      h('p', { role: 'status' }, 'Only admin keys may create clusters.'));
  }
  const name = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false',
    testid: 'create-name' });
  const recovery = h('select', { testid: 'create-node-recovery' },
    h('option', { value: 'Automatic' }, 'Automatic'), h('option', { value: 'None' }, 'None'));
  const groupsEl = h('div', { class: 'groups' });
  const groups = [];
  let count = 0;
  const addGroup = () => {
    const g = groupFieldset(count, (el) => {
      groups.splice(groups.findIndex((x) => x.el === el), 1);
      el.remove();
    });
    count += 1;
    groups.push(g);
    groupsEl.append(g.el);
    return g;
  };
  addGroup();

  const modeName = uid('mode');
  const jsonText = h('textarea', { rows: '14', spellcheck: 'false', testid: 'create-json',
    placeholder: '[{"InstanceGroupName": "controller-machine", ...}]' });
  const formPart = h('div', { testid: 'create-form-groups' }, groupsEl,
    h('div', { class: 'actions' }, h('button', { type: 'button', class: 'secondary',
      testid: 'add-group', onclick: () => addGroup().el.querySelector('input').focus() },
    'Add instance group')));
  const jsonPart = h('div', { hidden: true },
    field('Instance groups as JSON', jsonText,
      'An array of instance groups (examples/demo-cluster.json) or a whole CreateCluster request'));
  const modeRadio = (value, label, checked) => {
    const r = h('input', { type: 'radio', name: modeName, value, checked, testid: `mode-${value}`,
      onchange: () => {
        formPart.hidden = value !== 'form';
        jsonPart.hidden = value !== 'json';
      } });
    return h('label', { class: 'inline' }, r, ' ', label);
  };

  const status = h('div', { 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', testid: 'create-submit' }, 'Create cluster');
  const form = h('form', { class: 'panel', testid: 'create-form', novalidate: true,
    onsubmit: async (ev) => {
      ev.preventDefault();
      let req;
      try {
        req = jsonPart.hidden
          ? createRequest(name.value, recovery.value, groups.map((g) => groupFromForm(g.read())))
          : requestFromPaste(jsonText.value, name.value, recovery.value);
      } catch (err) {
        replace(status, errorBox(err.message, 'create-error'));
        return;
      }
      submit.disabled = true;
      replace(status, 'Creating…');
      try {
        await page.api.call('CreateCluster', req);
        if (!page.disposed) page.navigate(href('cluster', req.ClusterName));
      } catch (err) {
        if (page.disposed) return;
        replace(status, errorBox(err, 'create-error'));
        submit.disabled = false;
      }
    } },
  h('h1', {}, 'Create cluster'),
  h('datalist', { id: 'instance-types' }, COMMON_TYPES.map((t) => h('option', { value: t }))),
  h('div', { class: 'grid' },
    field('Cluster name', name),
    field('Node recovery', recovery, 'Automatic: hpod replaces or reboots faulty nodes')),
  h('fieldset', { class: 'mode' }, h('legend', {}, 'Instance groups'),
    modeRadio('form', 'Fill in a form', true), modeRadio('json', 'Paste JSON', false)),
  formPart, jsonPart,
  h('div', { class: 'actions' }, submit,
    h('a', { class: 'button secondary', href: href('clusters') }, 'Cancel')),
  status);
  queueMicrotask(() => name.focus());
  return form;
}

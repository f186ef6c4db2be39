import type { VersionDefinition } from '../../../shared/schemas/tasks.js'

// The service's own tasks (DESIGN 10): every enterprise has them, new ones from enterprises/setup.ts and
// existing ones from migrations/0012_builtin_tasks.sql, which writes these same definitions (a test
// compares the two, field by field). A leaf: it imports nothing from domain/.
//
// They are ordinary llm tasks of origin `builtin`: nobody may change or delete them (409
// os_task_immutable); anyone may copy one and change the copy. They run beside other work (overlapPolicy
// os) under the enterprise-wide coo role, one run per lane at a time.

/** The tool a memory training run writes one lesson with (built by the memory training engine). */
export const rememberTool = 'os.remember'
/** The tool an improvement run proposes its change with (built by the recommendations feature). */
export const proposeChangeTool = 'os.propose_change'

export interface BuiltinTask {
  slug: string
  name: string
  kind: 'llm'
  /** The enterprise-wide role that runs it. */
  assigneeRole: 'coo'
  serializeOn: string[]
  /** The first version's definition, every field filled as createTask fills it. */
  definition: VersionDefinition
}

const trainMemorySkill = `# Train memory

You turn what one layer of the company did into short lessons that every later run and chat of that
layer recalls. Your input names the layer: \`layer\` is \`enterprise\` or \`team\` (with \`teamId\`);
a \`taskId\` narrows the runs to that task's.

## What you are given

- The layer's runs that finished since its last training: for each, the task, its input, and its result
  or the reason it failed.
- The gate decisions on those runs, with the notes the deciders wrote.
- The layer's active notes, each with its id.

## How to work

1. Read the runs and the decisions. Look for what a person had to correct, what failed for a reason that
   will come again, and what worked that was not obvious.
2. For each lesson, call \`os.remember\` once with:
   - \`text\`: the lesson, one or two plain sentences a colleague can act on ("Invoices from Acme need the
     PO number in the subject line"), not a story of what happened;
   - \`evidence\`: the ids of the runs that teach it;
   - \`correctsId\`: the id of an active note when the lesson shows that note is wrong or out of date.
3. Prefer correcting a wrong note over adding a new note beside it, and never write a lesson that an
   active note already says. One lesson per call; several calls are fine.
4. When nothing is worth remembering, write nothing.
5. End with \`os.finish\`: outcome \`succeeded\` and a summary of how many lessons you wrote and corrected.
`

const improveSkill = `# Improve a task

You study one task of the company and propose one change to its definition that would make its runs
succeed more often, cost less, or need fewer corrections. Your input is \`taskId\`.

## What you are given

- The task's current definition: goal, metric, guardrails, skill, tools, gates, inputs and spend.
- Its recent runs, each with its outcome, or the reason it failed.
- The gate decisions on those runs, with the notes the deciders wrote.

## How to work

1. Find the pattern: what went wrong more than once, what the reviewers kept asking for, where the skill
   is silent or misleading.
2. Call \`os.propose_change\` once, with:
   - \`changes\`: only the fields of the definition you change, as a version publish takes them (most
     often \`skillMd\`, \`guardrails\` or \`goal\`);
   - \`rationale\`: why this change, in a few sentences a person can judge;
   - \`evidence\`: the runs that show it, each \`{runId, why}\`.
3. A person approves or declines your proposal; nothing changes before that.
4. When the runs show nothing worth changing, propose nothing.
5. End with \`os.finish\`: outcome \`succeeded\` and a one-line summary of what you proposed, or why
   nothing.
`

/** The two built-in tasks, in the order they are made. */
export const builtinTasks: readonly BuiltinTask[] = [
  {
    slug: 'os-improve',
    name: 'Improve a task',
    kind: 'llm',
    assigneeRole: 'coo',
    serializeOn: ['taskId'],
    definition: {
      overlapPolicy: 'os',
      goal: "Propose one change to a task's definition that its recent runs and gate decisions show it needs.",
      metric: { text: 'Proposals that people approve' },
      guardrails: [
        'Propose changes to the task you were given only.',
        'Never propose removing a gate or widening the tools a task may call.',
        'Cite the runs that show the problem; propose nothing you cannot show.',
        'Call os.propose_change at most once per run.',
      ],
      skillMd: improveSkill,
      tools: [proposeChangeTool],
      gates: [],
      inputs: [{ key: 'taskId', label: 'Task to improve', type: 'string', required: true }],
      spend: null,
      workspace: null,
      successors: null,
    },
  },
  {
    slug: 'os-train-memory',
    name: 'Train memory',
    kind: 'llm',
    assigneeRole: 'coo',
    serializeOn: ['layer', 'teamId'],
    definition: {
      overlapPolicy: 'os',
      goal: "Turn a layer's finished runs and gate decisions into short lessons that later runs recall.",
      metric: { text: 'Lessons that are recalled and not rated down' },
      guardrails: [
        'One lesson per os.remember call, backed by the runs that teach it.',
        'Prefer correcting a wrong note over adding a duplicate.',
        'Never write secrets, keys, passwords or personal data into a note.',
      ],
      skillMd: trainMemorySkill,
      tools: [rememberTool],
      gates: [],
      inputs: [
        {
          key: 'layer',
          label: 'Layer to train',
          type: 'string',
          required: true,
          placeholder: 'enterprise or team',
        },
        { key: 'teamId', label: 'Team (for the team layer)', type: 'string' },
        { key: 'taskId', label: 'Only the runs of this task', type: 'string' },
      ],
      spend: null,
      workspace: null,
      successors: null,
    },
  },
]

export const builtinSlugs = builtinTasks.map((t) => t.slug)

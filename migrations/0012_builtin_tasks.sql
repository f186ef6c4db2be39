-- The service's own tasks, os-improve and os-train-memory (DESIGN 10), for the enterprises made before
-- them; a new enterprise gets them from server/domain/enterprise-setup.ts. The definitions are those of
-- server/domain/builtin-tasks.ts, written as createTask writes them: a task row (no team, the
-- enterprise-wide coo role, origin builtin, no definition issues) and its first version. A test compares
-- a migrated enterprise's built-in tasks with a new one's, field by field.

-- The os- slugs are the service's from now on: a task that already took one keeps its place under a
-- slug of its own (its runs keep the slug they ran under).
update tasks
   set slug = slug || '-' || left(id::text, 8), updated_at = now()
 where slug in ('os-improve', 'os-train-memory') and origin <> 'builtin';

with builtin (slug, name, assignee_role, kind, serialize_on, definition) as (values
  ('os-improve', 'Improve a task', 'coo', 'llm', '["taskId"]'::jsonb,
   $definition${
  "overlapPolicy": "os",
  "goal": "Propose one change to a task's definition that its recent runs and gate decisions show it needs.",
  "metric": {
    "text": "Proposals that people approve"
  },
  "guardrails": [
    "Propose changes to the task you were given only.",
    "Never propose removing a gate or widening the tools a task may call.",
    "Cite the runs that show the problem; propose nothing you cannot show.",
    "Call os.propose_change at most once per run."
  ],
  "skillMd": "# Improve a task\n\nYou study one task of the company and propose one change to its definition that would make its runs\nsucceed more often, cost less, or need fewer corrections. Your input is `taskId`.\n\n## What you are given\n\n- The task's current definition: goal, metric, guardrails, skill, tools, gates, inputs and spend.\n- Its recent runs, each with its outcome, or the reason it failed.\n- The gate decisions on those runs, with the notes the deciders wrote.\n\n## How to work\n\n1. Find the pattern: what went wrong more than once, what the reviewers kept asking for, where the skill\n   is silent or misleading.\n2. Call `os.propose_change` once, with:\n   - `changes`: only the fields of the definition you change, as a version publish takes them (most\n     often `skillMd`, `guardrails` or `goal`);\n   - `rationale`: why this change, in a few sentences a person can judge;\n   - `evidence`: the runs that show it, each `{runId, why}`.\n3. A person approves or declines your proposal; nothing changes before that.\n4. When the runs show nothing worth changing, propose nothing.\n5. End with `os.finish`: outcome `succeeded` and a one-line summary of what you proposed, or why\n   nothing.\n",
  "tools": [
    "os.propose_change"
  ],
  "gates": [],
  "inputs": [
    {
      "key": "taskId",
      "label": "Task to improve",
      "type": "string",
      "required": true
    }
  ],
  "spend": null,
  "workspace": null,
  "successors": null
}$definition$::jsonb),
  ('os-train-memory', 'Train memory', 'coo', 'llm', '["layer","teamId"]'::jsonb,
   $definition${
  "overlapPolicy": "os",
  "goal": "Turn a layer's finished runs and gate decisions into short lessons that later runs recall.",
  "metric": {
    "text": "Lessons that are recalled and not rated down"
  },
  "guardrails": [
    "One lesson per os.remember call, backed by the runs that teach it.",
    "Prefer correcting a wrong note over adding a duplicate.",
    "Never write secrets, keys, passwords or personal data into a note."
  ],
  "skillMd": "# Train memory\n\nYou turn what one layer of the company did into short lessons that every later run and chat of that\nlayer recalls. Your input names the layer: `layer` is `enterprise` or `team` (with `teamId`);\na `taskId` narrows the runs to that task's.\n\n## What you are given\n\n- The layer's runs that finished since its last training: for each, the task, its input, and its result\n  or the reason it failed.\n- The gate decisions on those runs, with the notes the deciders wrote.\n- The layer's active notes, each with its id.\n\n## How to work\n\n1. Read the runs and the decisions. Look for what a person had to correct, what failed for a reason that\n   will come again, and what worked that was not obvious.\n2. For each lesson, call `os.remember` once with:\n   - `text`: the lesson, one or two plain sentences a colleague can act on (\"Invoices from Acme need the\n     PO number in the subject line\"), not a story of what happened;\n   - `evidence`: the ids of the runs that teach it;\n   - `correctsId`: the id of an active note when the lesson shows that note is wrong or out of date.\n3. Prefer correcting a wrong note over adding a new note beside it, and never write a lesson that an\n   active note already says. One lesson per call; several calls are fine.\n4. When nothing is worth remembering, write nothing.\n5. End with `os.finish`: outcome `succeeded` and a summary of how many lessons you wrote and corrected.\n",
  "tools": [
    "os.remember"
  ],
  "gates": [],
  "inputs": [
    {
      "key": "layer",
      "label": "Layer to train",
      "type": "string",
      "required": true,
      "placeholder": "enterprise or team"
    },
    {
      "key": "teamId",
      "label": "Team (for the team layer)",
      "type": "string"
    },
    {
      "key": "taskId",
      "label": "Only the runs of this task",
      "type": "string"
    }
  ],
  "spend": null,
  "workspace": null,
  "successors": null
}$definition$::jsonb)
), made as materialized (
  select e.id as enterprise_id, b.*, gen_random_uuid() as task_id, gen_random_uuid() as version_id
    from enterprises e cross join builtin b
   where not exists (select 1 from tasks t where t.enterprise_id = e.id and t.slug = b.slug)
), task as (
  -- The task names its version before the version exists (the key is checked at commit).
  insert into tasks (id, enterprise_id, slug, name, team_id, assignee_role, kind, status, serialize_on,
                     current_version_id, definition_issues, origin, source_task_id)
  select task_id, enterprise_id, slug, name, null, assignee_role, kind, 'active', serialize_on,
         version_id, '[]', 'builtin', null
    from made
)
insert into task_versions (id, enterprise_id, task_id, number, definition)
select version_id, enterprise_id, task_id, 1, definition from made;

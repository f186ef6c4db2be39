-- What a run may write to memory comes from a trusted caller, recorded at its start (issue 41; DESIGN 15).
-- os.remember used to write at the layer named by the run's input, which a webhook body, a schedule or an
-- API caller chooses: a webhook could plant an enterprise-layer note that every later run and chat is told
-- to follow. memory_scope is {layer, teamId, taskId}, written only by POST /v1/memory/train's start
-- (learning/memory/training.ts startTraining); every other run has none, and writes its own task's layer
-- if its task is the enterprise's own, nothing if it is built in.
alter table runs add column memory_scope jsonb;

-- The trainings that finished before this migration were all started by POST /v1/memory/train or by an
-- API start of os-train-memory naming a layer: their layer is kept (a training narrowed to one task's
-- runs is not: it did not see the layer's), so the next training of a layer is
-- given what finished since the last one (chooseTrainingMaterial reads this column), not everything
-- again. A training still under way is not given one: it writes no note (start it again).
update runs r
   set memory_scope = jsonb_build_object(
         'layer', r.input ->> 'layer',
         'teamId', case when r.input ->> 'layer' = 'team' then r.input ->> 'teamId' end,
         'taskId', null)
  from tasks t
 where t.id = r.task_id and t.enterprise_id = r.enterprise_id
   and t.origin = 'builtin' and t.slug = 'os-train-memory'
   and r.status = 'succeeded' and not (r.input ? 'taskId')
   and (r.input ->> 'layer' = 'enterprise'
        or (r.input ->> 'layer' = 'team'
            and (r.input ->> 'teamId') ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'));

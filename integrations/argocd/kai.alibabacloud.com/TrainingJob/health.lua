-- Argo CD health check of a training job run by eto (TrainingJob of kai.alibabacloud.com,
-- MPIJob and PyTorchJob of kubeflow.org, TrainJob of trainer.kubeflow.org: the same script
-- serves all four). It also reads the statuses that et-operator, mpi-operator,
-- training-operator v1 and Kubeflow Trainer write (conditions without Ready and Stalled;
-- Trainer's `Complete`), since clusters switch operators. A TrainJob keeps eto's conditions
-- in `etoConditions`, apart from Trainer's.
--
-- It runs in Argo CD's sandbox: Lua 5.1 with only the base, table and os libraries, so it
-- uses no string or math function and no string method.
--
--   Healthy      running (Ready=True), or succeeded
--   Progressing  waiting for workers, the launcher, GPUs or a resume; restarting; scaling;
--                suspending; a spec newer than the status (generation > observedGeneration)
--   Suspended    suspended, by its spec or below its minimum of workers
--   Degraded     failed, or Stalled=True (invalid spec, taken name, rejected pod, ...)

local health = {}

local function report(status, message)
  health.status = status
  health.message = message
  return health
end

local function find(conditions, type)
  if conditions == nil then
    return nil
  end
  for _, condition in ipairs(conditions) do
    if condition.type == type then
      return condition
    end
  end
  return nil
end

local function holds(condition)
  return condition ~= nil and condition.status == "True"
end

-- What a condition says, for a person: its message, else its reason.
local function says(condition, otherwise)
  if condition ~= nil and condition.message ~= nil and condition.message ~= "" then
    return condition.message
  end
  if condition ~= nil and condition.reason ~= nil then
    return condition.reason
  end
  return otherwise
end

-- The condition that changed last (RFC 3339 times in UTC order as strings do).
local function newest(conditions)
  local found = nil
  for _, condition in ipairs(conditions or {}) do
    local time = condition.lastTransitionTime or ""
    if found == nil or time >= (found.lastTransitionTime or "") then
      found = condition
    end
  end
  return found
end

local status = obj.status
if status == nil then
  return report("Progressing", "Waiting for the operator to take the job")
end
local conditions = status.etoConditions or status.conditions
local phase = status.phase

local generation = obj.metadata.generation
if generation ~= nil and status.observedGeneration ~= nil and generation > status.observedGeneration then
  return report("Progressing", "Waiting for the operator to act on generation " .. generation ..
    " of the spec (the status describes generation " .. status.observedGeneration .. ")")
end

local failed = find(conditions, "Failed")
if phase == "Failed" or holds(failed) then
  return report("Degraded", says(failed, "The job failed"))
end
local stalled = find(conditions, "Stalled")
if holds(stalled) then
  return report("Degraded", says(stalled, "The job cannot make progress"))
end

local succeeded = find(conditions, "Succeeded") or find(conditions, "Complete")
if phase == "Succeeded" or holds(succeeded) then
  return report("Healthy", says(succeeded, "The job succeeded"))
end

local suspended = find(conditions, "Suspended")
if phase == "Suspended" or (phase == nil and holds(suspended)) then
  return report("Suspended", says(suspended, "The job is suspended"))
end

local restarting = find(conditions, "Restarting")
if phase == "Restarting" or (phase == nil and holds(restarting)) then
  return report("Progressing", says(restarting, "The job is restarting"))
end
if phase == "Scaling" then
  return report("Progressing", says(find(conditions, "Scaling"), "The job is scaling"))
end

-- eto's own conditions: Ready says whether it trains, and why not.
local ready = find(conditions, "Ready")
if ready ~= nil then
  if holds(ready) then
    return report("Healthy", says(ready, "The job is running"))
  end
  return report("Progressing", says(ready, "The job is not running yet"))
end

-- An earlier operator's conditions.
local running = find(conditions, "Running")
if holds(running) then
  return report("Healthy", says(running, "The job is running"))
end
return report("Progressing", says(newest(conditions), "Waiting for the job to start"))

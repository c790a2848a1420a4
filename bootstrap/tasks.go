package bootstrap

import (
	"github.com/google/wire"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
)

// TaskPorts is one task store as each use case declares it: the use cases
// take only the methods they call, so the store is handed to each under
// that use case's interface. A store lacking a method fails to compile
// here, not at a request.
type TaskPorts struct {
	Auth    application.AuthStore
	Checks  application.CheckStore
	Events  application.EventStore
	Active  application.ActiveTasks
	Counts  application.RolloutCounts
	History application.TaskHistory
	Tx      application.TaskTransactor
}

// taskPortsOf hands one store out under every use case's interface.
func taskPortsOf(s application.TaskStore) TaskPorts {
	return TaskPorts{Auth: s, Checks: s, Events: s, Active: s, Counts: s, History: s, Tx: s}
}

// MemoryTaskPorts are the in-process store's task ports.
func MemoryTaskPorts(t *memory.Tasks) TaskPorts { return taskPortsOf(t) }

// Checks finds the Postgres store's creation in one statement (two round
// trips a creation instead of a transaction's) by asking its CheckStore;
// losing the method would silently take the long path on every creation.
var _ application.UnchangedInserter = (*postgres.TaskRepository)(nil)

// Events finds its progress event in one statement (three round trips an
// event instead of nine) the same way, by asking its EventStore.
var _ application.UnchangedUpdater = (*postgres.TaskRepository)(nil)

// A final event's judgement after its commit reads the rollout and its
// counters in one statement (one round trip instead of a read-only
// transaction's four) the same way, by asking its TaskTransactor.
var _ application.JudgeReader = (*postgres.TaskRepository)(nil)

// PostgresTaskPorts are the Postgres task ports (the serving repository:
// the check's reads on the read replica when there is one).
func PostgresTaskPorts(t *postgres.TaskRepository) TaskPorts { return taskPortsOf(t) }

// taskPortSet gives each use case its interface of the task store.
var taskPortSet = wire.FieldsOf(new(TaskPorts), "Auth", "Checks", "Events", "Active", "Counts", "History", "Tx")

// Package redislock implements ports.Locker on Redis with rueidislock, so that
// replicas of the service serialise the find-or-create of a device's task
// (docs/DOMAIN.md check rule 7).
//
// rueidislock is used rather than a hand-written SET NX loop because its
// scripts read the lock key after every attempt, which subscribes the
// connection (Redis client-side caching) to that key: a waiter is told when
// the holder's key is deleted or expires and gets in about one round trip
// after the release, instead of at the next tick of a sleep loop, and a
// contended lock costs no polling traffic. It also extends a held lock's
// validity in the background and cancels the holder's context when the lock
// is lost, which is what lets a critical section roll its transaction back
// instead of committing without the lock.
//
// The adapter adds what the product needs on top: a bounded wait that never
// shortens the lock's validity, an answer within the wait even when Redis
// stops answering, the distinction between "held elsewhere" and "Redis
// unavailable", a release that never holds the request up for long, and a
// way around a lost wake-up in rueidislock's own waiting (see Locker).
package redislock

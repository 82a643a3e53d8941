-- migration 11: announce a run's changes of state, not every write.
--
-- The trigger that ran pg_notify for every new version held the notification queue's lock
-- through each commit's WAL flush, which serialised every writer's commits (8 clients:
-- 2,293 heartbeats/s with it, 3,096 without). The board follows the change cursor
-- (migration 10) and needs no notification; what is announced now is a run starting and
-- a run moving to another state, which a listener may wait on. Heartbeats, notes, artifacts
-- and evidence are in the cursor alone. Writers of every version keep working: the
-- trigger is the server's.

DROP TRIGGER runs_notify ON runs;

CREATE TRIGGER runs_notify AFTER INSERT ON runs
    FOR EACH ROW EXECUTE FUNCTION runs_notify();

CREATE TRIGGER runs_notify_state AFTER UPDATE OF state ON runs
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION runs_notify();

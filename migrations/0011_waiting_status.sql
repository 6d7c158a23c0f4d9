-- A request on an event's waiting list (0012_waiting_list.sql) is `waiting`:
-- not queued (no worker claims it, so it costs no worker time while it
-- waits) and not finished. A migration of its own: PostgreSQL lets a new
-- enum value be used only once the transaction that added it has committed.
ALTER TYPE seatq.request_status ADD VALUE 'waiting' AFTER 'queued';

-- Every llm run's recall counts one more recall on each note it recalls (recallNotes): an update of
-- `recalls` only. On a full page such an update writes a new row version with new index entries, and
-- the GIN index on the search vector takes them into its pending list, which every search then reads
-- through until a vacuum merges it: with 100,000 notes, a few thousand recalls doubled a run's recall
-- (npm run bench:memory). Room left on each page lets those updates stay on their page (HOT: no new
-- index entry); the notes already written get that room at their table's next rewrite, new pages now.
alter table memory_notes set (fillfactor = 70);

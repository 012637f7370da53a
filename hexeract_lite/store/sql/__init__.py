"""The SQL stores' shared base: :class:`.store.SqlScheduleStore`."""

CREATE TABLE heartbeat (id int PRIMARY KEY);

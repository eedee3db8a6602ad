DROP TABLE credentials;

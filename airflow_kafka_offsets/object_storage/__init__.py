"""S3-compatible object storage: the connection type, access settings for Arrow and Spark's S3A,
signed requests, refusal messages and the files of Spark attempts (:mod:`.storage`)."""

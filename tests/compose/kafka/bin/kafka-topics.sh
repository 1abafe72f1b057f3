#!/bin/sh
# The official image's script of the same name (docker-compose.yml's topics-reset).
exec java -Xmx128m -XX:TieredStopAtLevel=1 -cp "/opt/kafka/libs/*" \
    -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties \
    org.apache.kafka.tools.TopicCommand "$@"

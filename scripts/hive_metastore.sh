#!/usr/bin/env bash
# Apache Hive's standalone metastore 3.1.3 (the jars `scripts/test` copies from Maven
# Central into .emulators/jvm/hive) on 127.0.0.1:PORT, its Derby database and warehouse
# in DIR; in the foreground, until killed. It logs "Started the new metaserver on port"
# to stderr once it listens. The catalog tests start it (tests/it/metastore.rs,
# tests/engines/test_catalogs.py).
#
# Usage: scripts/hive_metastore.sh DIR PORT
set -euo pipefail
dir=$(realpath -m "$1")
port=$2
jars="${BRONZE_JVM:-$(cd "$(dirname "$0")/.." && pwd)/.emulators/jvm}/hive"
if ! ls "$jars"/hive-standalone-metastore-*.jar > /dev/null 2>&1; then
  echo "no Hive metastore jars under $jars: run scripts/test (mvn -f scripts/jvm/pom.xml -Phive dependency:copy-dependencies)" >&2
  exit 2
fi
mkdir -p "$dir/conf" "$dir/warehouse"
cat > "$dir/conf/metastore-site.xml" <<XML
<configuration>
  <property><name>javax.jdo.option.ConnectionURL</name><value>jdbc:derby:;databaseName=$dir/derby;create=true</value></property>
  <property><name>javax.jdo.option.ConnectionDriverName</name><value>org.apache.derby.jdbc.EmbeddedDriver</value></property>
  <property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
  <property><name>metastore.schema.verification</name><value>false</value></property>
  <property><name>metastore.warehouse.dir</name><value>file://$dir/warehouse</value></property>
  <property><name>metastore.expression.proxy</name><value>org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy</value></property>
  <property><name>metastore.task.threads.always</name><value>org.apache.hadoop.hive.metastore.events.EventCleanerTask</value></property>
  <property><name>metastore.async.log.enabled</name><value>false</value></property>
</configuration>
XML
cat > "$dir/conf/metastore-log4j2.properties" <<'LOG'
status = ERROR
appenders = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %p %c{1}: %m%n
rootLogger.level = ERROR
rootLogger.appenderRefs = console
rootLogger.appenderRef.console.ref = console
loggers = hms
logger.hms.name = org.apache.hadoop.hive.metastore.HiveMetaStore
logger.hms.level = INFO
LOG
cd "$dir"
exec java -Xmx512m -cp "conf:$jars/*" org.apache.hadoop.hive.metastore.HiveMetaStore -p "$port"

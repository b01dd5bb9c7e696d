/**
 * Tables read back from a Hive Metastore through Hive's own client (HiveMetaStoreClient of
 * hive-standalone-metastore 3.1.3), for bronze's catalog tests (tests/engines/test_catalogs.py).
 *
 * <p>Usage: {@code java -cp '<hive jars>/*' scripts/jvm/HmsRead.java thrift://host:port < requests}
 *
 * <p>Each stdin line is {@code <database>\t<table>}, or {@code <database>} alone for the names of
 * its tables, or {@code set\t<database>\t<table>\t<key>\t<value>} to set a table parameter
 * (as another tool would; answered with the table). Each gets one JSON line on stdout, in input order: {@code {"database":..., "table":...,
 * "tableType":..., "location":..., "serdePath":..., "inputFormat":..., "serde":...,
 * "parameters":{...}, "columns":[[name, type], ...]}}, {@code {"database":..., "tables":[...]}}, or
 * {@code {"error":"<class>: <message>"}}. Exit code 0 unless the metastore cannot be reached.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStoreClient;
import org.apache.hadoop.hive.metastore.api.FieldSchema;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;

public class HmsRead {
  public static void main(String[] args) throws Exception {
    Configuration conf = MetastoreConf.newMetastoreConf();
    MetastoreConf.setVar(conf, MetastoreConf.ConfVars.THRIFT_URIS, args[0]);
    MetastoreConf.setLongVar(conf, MetastoreConf.ConfVars.THRIFT_CONNECTION_RETRIES, 1);
    HiveMetaStoreClient client = new HiveMetaStoreClient(conf);
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) {
        continue;
      }
      String[] parts = line.split("\t", 5);
      try {
        if (parts[0].equals("set") && parts.length == 5) {
          Table t = client.getTable(parts[1], parts[2]);
          t.getParameters().put(parts[3], parts[4]);
          client.alter_table(parts[1], parts[2], t);
          System.out.println(table(client.getTable(parts[1], parts[2])));
        } else if (parts.length == 1) {
          List<String> names = client.getAllTables(parts[0]);
          StringBuilder out = new StringBuilder("{\"database\":" + str(parts[0]) + ",\"tables\":[");
          for (int i = 0; i < names.size(); i++) {
            out.append(i == 0 ? "" : ",").append(str(names.get(i)));
          }
          System.out.println(out.append("]}"));
        } else {
          System.out.println(table(client.getTable(parts[0], parts[1])));
        }
      } catch (Exception e) {
        System.out.println("{\"error\":" + str(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}");
      }
    }
    client.close();
  }

  static String table(Table t) {
    StringBuilder out = new StringBuilder("{");
    out.append("\"database\":").append(str(t.getDbName()));
    out.append(",\"table\":").append(str(t.getTableName()));
    out.append(",\"tableType\":").append(str(t.getTableType()));
    out.append(",\"location\":").append(str(t.getSd().getLocation()));
    Map<String, String> serdeParams = t.getSd().getSerdeInfo().getParameters();
    out.append(",\"serdePath\":").append(str(serdeParams == null ? null : serdeParams.get("path")));
    out.append(",\"inputFormat\":").append(str(t.getSd().getInputFormat()));
    out.append(",\"serde\":").append(str(t.getSd().getSerdeInfo().getSerializationLib()));
    out.append(",\"parameters\":{");
    boolean first = true;
    for (Map.Entry<String, String> e : new TreeMap<>(t.getParameters()).entrySet()) {
      out.append(first ? "" : ",").append(str(e.getKey())).append(":").append(str(e.getValue()));
      first = false;
    }
    out.append("},\"columns\":[");
    List<FieldSchema> cols = t.getSd().getCols();
    for (int i = 0; i < cols.size(); i++) {
      out.append(i == 0 ? "" : ",")
          .append("[").append(str(cols.get(i).getName())).append(",")
          .append(str(cols.get(i).getType())).append("]");
    }
    return out.append("]}").toString();
  }

  static String str(String s) {
    if (s == null) {
      return "null";
    }
    StringBuilder out = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    return out.append("\"").toString();
  }
}

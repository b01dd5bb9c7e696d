/**
 * The Delta Kernel for Java reading Delta tables for bronze's engine tests (tests/engines).
 *
 * <p>Usage: {@code java -cp '<kernel jars>/*' scripts/jvm/KernelRead.java < requests}
 *
 * <p>Each stdin line is {@code <absolute table path>\t<version | latest>} (no tab: latest; blank
 * lines are skipped). Each request gets one JSON line on stdout, in input order:
 * {@code {"path":..., "version":N, "schema":[{"name":..., "type":...}], "rows":[{...}]}} or
 * {@code {"path":..., "error":"<class>: <message>"}}. Values: integers, floats and booleans as JSON
 * values (NaN and infinities as strings), binary as base64, decimal as a plain string, date as
 * YYYY-MM-DD, timestamp and timestamp_ntz as microseconds since the epoch, struct as an object,
 * array as an array, map as an array of [key, value] pairs, other types as "?" + type. Exit code 0
 * unless stdin cannot be read.
 *
 * <p>A line {@code create\t<absolute table path>\t<name type[!],...>} creates an empty table there
 * through the Kernel's own create-table transaction instead (types: string, long, int, double,
 * boolean, timestamp, date; {@code !} for NOT NULL) and answers {@code {"path":...,"version":0}}.
 */

import io.delta.kernel.Operation;
import io.delta.kernel.Scan;
import io.delta.kernel.TransactionCommitResult;
import io.delta.kernel.Snapshot;
import io.delta.kernel.Table;
import io.delta.kernel.data.ArrayValue;
import io.delta.kernel.data.ColumnVector;
import io.delta.kernel.data.ColumnarBatch;
import io.delta.kernel.data.FilteredColumnarBatch;
import io.delta.kernel.data.MapValue;
import io.delta.kernel.data.Row;
import io.delta.kernel.defaults.engine.DefaultEngine;
import io.delta.kernel.engine.Engine;
import io.delta.kernel.engine.FileReadResult;
import io.delta.kernel.internal.InternalScanFileUtils;
import io.delta.kernel.internal.data.ScanStateRow;
import io.delta.kernel.internal.util.Utils;
import io.delta.kernel.types.ArrayType;
import io.delta.kernel.types.BinaryType;
import io.delta.kernel.types.BooleanType;
import io.delta.kernel.types.ByteType;
import io.delta.kernel.types.DataType;
import io.delta.kernel.types.DateType;
import io.delta.kernel.types.DecimalType;
import io.delta.kernel.types.DoubleType;
import io.delta.kernel.types.FloatType;
import io.delta.kernel.types.IntegerType;
import io.delta.kernel.types.LongType;
import io.delta.kernel.types.MapType;
import io.delta.kernel.types.ShortType;
import io.delta.kernel.types.StringType;
import io.delta.kernel.types.StructField;
import io.delta.kernel.types.StructType;
import io.delta.kernel.types.TimestampNTZType;
import io.delta.kernel.types.TimestampType;
import io.delta.kernel.utils.CloseableIterable;
import io.delta.kernel.utils.CloseableIterator;
import io.delta.kernel.utils.FileStatus;
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.util.Base64;
import java.util.List;
import java.util.Optional;
import org.apache.hadoop.conf.Configuration;

public class KernelRead {

  public static void main(String[] args) {
    // Our JSON goes to the real stdout; anything a library prints goes to stderr.
    PrintStream out =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
    System.setOut(System.err);

    Engine engine = null;
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try {
      String line;
      while ((line = in.readLine()) != null) {
        if (line.isBlank()) {
          continue;
        }
        int tab = line.indexOf('\t');
        String path = tab < 0 ? line : line.substring(0, tab);
        String version = tab < 0 ? "latest" : line.substring(tab + 1).trim();
        String result;
        try {
          if (engine == null) {
            engine = DefaultEngine.create(new Configuration());
          }
          result =
              path.equals("create")
                  ? create(engine, version.substring(0, version.indexOf('\t')),
                      version.substring(version.indexOf('\t') + 1))
                  : read(engine, path, version);
        } catch (Throwable t) {
          StringBuilder sb = new StringBuilder("{\"path\":");
          str(sb, path);
          sb.append(",\"error\":");
          str(sb, t.getClass().getName() + ": " + t.getMessage());
          result = sb.append('}').toString();
        }
        out.print(result);
        out.print('\n');
        out.flush();
      }
    } catch (IOException e) {
      System.err.println("KernelRead: cannot read stdin: " + e);
      out.flush();
      System.exit(2);
    }
    out.flush();
    System.exit(0);
  }

  static String create(Engine engine, String path, String columns) {
    StructType schema = new StructType();
    for (String column : columns.split(",")) {
      String[] nameType = column.trim().split("\\s+");
      String type = nameType[1];
      boolean notNull = type.endsWith("!");
      type = notNull ? type.substring(0, type.length() - 1) : type;
      DataType t =
          switch (type) {
            case "string" -> StringType.STRING;
            case "long" -> LongType.LONG;
            case "int" -> IntegerType.INTEGER;
            case "double" -> DoubleType.DOUBLE;
            case "boolean" -> BooleanType.BOOLEAN;
            case "timestamp" -> TimestampType.TIMESTAMP;
            case "date" -> DateType.DATE;
            default -> throw new IllegalArgumentException("no type " + type);
          };
      schema = schema.add(nameType[0], t, !notNull);
    }
    Table table = Table.forPath(engine, path);
    TransactionCommitResult done =
        table
            .createTransactionBuilder(engine, "bronze-tests", Operation.CREATE_TABLE)
            .withSchema(engine, schema)
            .build(engine)
            .commit(engine, CloseableIterable.emptyIterable());
    StringBuilder sb = new StringBuilder("{\"path\":");
    str(sb, path);
    return sb.append(",\"version\":").append(done.getVersion()).append('}').toString();
  }

  static String read(Engine engine, String path, String version) throws IOException {
    Table table = Table.forPath(engine, path);
    Snapshot snapshot =
        version.equals("latest")
            ? table.getLatestSnapshot(engine)
            : table.getSnapshotAsOfVersion(engine, Long.parseLong(version));

    StringBuilder sb = new StringBuilder("{\"path\":");
    str(sb, path);
    sb.append(",\"version\":").append(snapshot.getVersion()).append(",\"schema\":[");
    boolean first = true;
    for (StructField f : snapshot.getSchema().fields()) {
      if (!first) sb.append(',');
      first = false;
      sb.append("{\"name\":");
      str(sb, f.getName());
      sb.append(",\"type\":");
      str(sb, f.getDataType().toString());
      sb.append('}');
    }
    sb.append("],\"rows\":[");

    Scan scan = snapshot.getScanBuilder().build();
    Row scanState = scan.getScanState(engine);
    StructType physicalReadSchema = ScanStateRow.getPhysicalDataReadSchema(scanState);
    boolean firstRow = true;
    try (CloseableIterator<FilteredColumnarBatch> scanFiles = scan.getScanFiles(engine)) {
      while (scanFiles.hasNext()) {
        try (CloseableIterator<Row> scanFileRows = scanFiles.next().getRows()) {
          while (scanFileRows.hasNext()) {
            Row scanFile = scanFileRows.next();
            FileStatus file = InternalScanFileUtils.getAddFileStatus(scanFile);
            CloseableIterator<ColumnarBatch> physical =
                engine
                    .getParquetHandler()
                    .readParquetFiles(
                        Utils.singletonCloseableIterator(file), physicalReadSchema, Optional.empty())
                    .map(FileReadResult::getData);
            try (CloseableIterator<FilteredColumnarBatch> logical =
                Scan.transformPhysicalData(engine, scanState, scanFile, physical)) {
              while (logical.hasNext()) {
                FilteredColumnarBatch fb = logical.next();
                ColumnarBatch data = fb.getData();
                ColumnVector sel = fb.getSelectionVector().orElse(null);
                List<StructField> fields = data.getSchema().fields();
                for (int r = 0; r < data.getSize(); r++) {
                  if (sel != null && (sel.isNullAt(r) || !sel.getBoolean(r))) continue;
                  if (!firstRow) sb.append(',');
                  firstRow = false;
                  sb.append('{');
                  for (int c = 0; c < fields.size(); c++) {
                    if (c > 0) sb.append(',');
                    str(sb, fields.get(c).getName());
                    sb.append(':');
                    value(sb, data.getColumnVector(c), r);
                  }
                  sb.append('}');
                }
              }
            }
          }
        }
      }
    }
    return sb.append("]}").toString();
  }

  static void value(StringBuilder sb, ColumnVector v, int i) {
    if (v.isNullAt(i)) {
      sb.append("null");
      return;
    }
    DataType t = v.getDataType();
    if (t instanceof BooleanType) {
      sb.append(v.getBoolean(i));
    } else if (t instanceof ByteType) {
      sb.append(v.getByte(i));
    } else if (t instanceof ShortType) {
      sb.append(v.getShort(i));
    } else if (t instanceof IntegerType) {
      sb.append(v.getInt(i));
    } else if (t instanceof LongType
        || t instanceof TimestampType
        || t instanceof TimestampNTZType) {
      sb.append(v.getLong(i));
    } else if (t instanceof FloatType) {
      float f = v.getFloat(i);
      if (Float.isNaN(f) || Float.isInfinite(f)) str(sb, Float.toString(f));
      else sb.append(Float.toString(f));
    } else if (t instanceof DoubleType) {
      double d = v.getDouble(i);
      if (Double.isNaN(d) || Double.isInfinite(d)) str(sb, Double.toString(d));
      else sb.append(Double.toString(d));
    } else if (t instanceof StringType) {
      str(sb, v.getString(i));
    } else if (t instanceof BinaryType) {
      str(sb, Base64.getEncoder().encodeToString(v.getBinary(i)));
    } else if (t instanceof DecimalType) {
      str(sb, v.getDecimal(i).toPlainString());
    } else if (t instanceof DateType) {
      str(sb, LocalDate.ofEpochDay(v.getInt(i)).toString());
    } else if (t instanceof StructType) {
      List<StructField> fields = ((StructType) t).fields();
      sb.append('{');
      for (int c = 0; c < fields.size(); c++) {
        if (c > 0) sb.append(',');
        str(sb, fields.get(c).getName());
        sb.append(':');
        value(sb, v.getChild(c), i);
      }
      sb.append('}');
    } else if (t instanceof ArrayType) {
      ArrayValue a = v.getArray(i);
      ColumnVector elems = a.getElements();
      sb.append('[');
      for (int k = 0; k < a.getSize(); k++) {
        if (k > 0) sb.append(',');
        value(sb, elems, k);
      }
      sb.append(']');
    } else if (t instanceof MapType) {
      MapValue m = v.getMap(i);
      ColumnVector keys = m.getKeys();
      ColumnVector vals = m.getValues();
      sb.append('[');
      for (int k = 0; k < m.getSize(); k++) {
        if (k > 0) sb.append(',');
        sb.append('[');
        value(sb, keys, k);
        sb.append(',');
        value(sb, vals, k);
        sb.append(']');
      }
      sb.append(']');
    } else {
      str(sb, "?" + t);
    }
  }

  /** A JSON string literal, ASCII only: non-ASCII and control characters as \\u escapes. */
  static void str(StringBuilder sb, String s) {
    if (s == null) {
      sb.append("null");
      return;
    }
    sb.append('"');
    for (int k = 0; k < s.length(); k++) {
      char ch = s.charAt(k);
      switch (ch) {
        case '"':
          sb.append("\\\"");
          break;
        case '\\':
          sb.append("\\\\");
          break;
        case '\n':
          sb.append("\\n");
          break;
        case '\r':
          sb.append("\\r");
          break;
        case '\t':
          sb.append("\\t");
          break;
        case '\b':
          sb.append("\\b");
          break;
        case '\f':
          sb.append("\\f");
          break;
        default:
          if (ch < 0x20 || ch >= 0x7f) {
            sb.append(String.format("\\u%04x", (int) ch));
          } else {
            sb.append(ch);
          }
      }
    }
    sb.append('"');
  }
}
